// Just enough of the protobuf wire format to read and write SentencePiece model files
// (ModelProto in sentencepiece_model.proto), whose generated C++ classes Debian does not
// ship. Field numbers used:
//   ModelProto:     1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
//   SentencePiece:  1 piece (string), 2 score (float), 3 type (enum: NORMAL 1, UNKNOWN 2,
//                   CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6)
//   TrainerSpec:    3 model_type (BPE = 2), 4 vocab_size, 35 byte_fallback,
//                   40 unk_id, 41 bos_id, 42 eos_id, 43 pad_id
//   NormalizerSpec: 1 name, 3 add_dummy_prefix, 4 remove_extra_whitespaces,
//                   5 escape_whitespaces
// The sentencepiece test checks these numbers against a model spm trains itself.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cln::test {

struct SpmPiece {
  std::string piece;
  float score = 0.0f;
  int type = 1;
};

// One message's fields: varints (last value wins) and length-delimited payloads (all).
struct ProtoFields {
  std::map<int, uint64_t> varint;
  std::map<int, uint32_t> fixed32;
  std::multimap<int, std::string> bytes;
};

inline uint64_t read_varint(std::string_view s, size_t& p) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= s.size()) throw std::runtime_error("protobuf: truncated varint");
    const auto b = static_cast<uint8_t>(s[p++]);
    v |= uint64_t{b & 0x7Fu} << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("protobuf: varint too long");
}

inline ProtoFields parse_fields(std::string_view s) {
  ProtoFields f;
  size_t p = 0;
  while (p < s.size()) {
    const uint64_t tag = read_varint(s, p);
    const int field = static_cast<int>(tag >> 3);
    switch (tag & 7) {
      case 0:
        f.varint[field] = read_varint(s, p);
        break;
      case 1:
        p += 8;
        break;
      case 2: {
        const uint64_t n = read_varint(s, p);
        if (n > s.size() - p) throw std::runtime_error("protobuf: truncated field");
        f.bytes.emplace(field, std::string(s.substr(p, n)));
        p += n;
        break;
      }
      case 5: {
        if (s.size() - p < 4) throw std::runtime_error("protobuf: truncated fixed32");
        uint32_t v;
        std::memcpy(&v, s.data() + p, 4);
        f.fixed32[field] = v;
        p += 4;
        break;
      }
      default:
        throw std::runtime_error("protobuf: unsupported wire type");
    }
  }
  return f;
}

inline std::vector<SpmPiece> read_spm_pieces(std::string_view model) {
  std::vector<SpmPiece> out;
  const ProtoFields top = parse_fields(model);
  auto [b, e] = top.bytes.equal_range(1);
  for (auto it = b; it != e; ++it) {
    const ProtoFields pf = parse_fields(it->second);
    SpmPiece sp;
    if (auto s = pf.bytes.find(1); s != pf.bytes.end()) sp.piece = s->second;
    if (auto sc = pf.fixed32.find(2); sc != pf.fixed32.end())
      std::memcpy(&sp.score, &sc->second, 4);
    if (auto t = pf.varint.find(3); t != pf.varint.end()) sp.type = static_cast<int>(t->second);
    out.push_back(std::move(sp));
  }
  return out;
}

inline ProtoFields read_submessage(std::string_view model, int field) {
  const ProtoFields top = parse_fields(model);
  auto it = top.bytes.find(field);
  return it == top.bytes.end() ? ProtoFields{} : parse_fields(it->second);
}

class ProtoWriter {
 public:
  void varint(int field, uint64_t v) {
    tag(field, 0);
    put_varint(v);
  }
  void int32(int field, int32_t v) { varint(field, static_cast<uint64_t>(int64_t{v})); }
  void f32(int field, float v) {
    tag(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    out_.append(b, 4);
  }
  void bytes(int field, std::string_view v) {
    tag(field, 2);
    put_varint(v.size());
    out_.append(v);
  }
  const std::string& str() const { return out_; }

 private:
  void tag(int field, int wire) {
    put_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire));
  }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  std::string out_;
};

struct SpmModelSpec {
  std::vector<SpmPiece> pieces;
  bool byte_fallback = false;
  int32_t unk = 0, bos = 1, eos = 2, pad = -1;
};

// A BPE model with the normalizer settings of Llama's tokenizer (identity rule, dummy
// prefix, whitespace kept and escaped as U+2581).
inline std::string write_spm_model(const SpmModelSpec& m) {
  ProtoWriter top;
  for (const SpmPiece& p : m.pieces) {
    ProtoWriter w;
    w.bytes(1, p.piece);
    w.f32(2, p.score);
    w.varint(3, static_cast<uint64_t>(p.type));
    top.bytes(1, w.str());
  }
  ProtoWriter trainer;
  trainer.varint(3, 2);
  trainer.int32(4, static_cast<int32_t>(m.pieces.size()));
  trainer.varint(35, m.byte_fallback ? 1 : 0);
  trainer.int32(40, m.unk);
  trainer.int32(41, m.bos);
  trainer.int32(42, m.eos);
  trainer.int32(43, m.pad);
  top.bytes(2, trainer.str());
  ProtoWriter norm;
  norm.bytes(1, "identity");
  norm.varint(3, 1);
  norm.varint(4, 0);
  norm.varint(5, 1);
  top.bytes(3, norm.str());
  return top.str();
}

}  // namespace cln::test
