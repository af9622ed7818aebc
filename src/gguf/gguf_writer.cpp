// The GGUF writer: v3, little-endian, tensor data aligned, written to a temporary file
// and renamed into place so a crash never leaves a half-written model behind.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"

namespace cln {
namespace {

class Out {
 public:
  explicit Out(std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& b_;
};

void put_scalar(Out& o, GgufType t, int64_t i, double f, const std::string& s) {
  switch (t) {
    case GgufType::UINT8: o.put(static_cast<uint8_t>(i)); break;
    case GgufType::INT8: o.put(static_cast<int8_t>(i)); break;
    case GgufType::UINT16: o.put(static_cast<uint16_t>(i)); break;
    case GgufType::INT16: o.put(static_cast<int16_t>(i)); break;
    case GgufType::UINT32: o.put(static_cast<uint32_t>(i)); break;
    case GgufType::INT32: o.put(static_cast<int32_t>(i)); break;
    case GgufType::UINT64: o.put(static_cast<uint64_t>(i)); break;
    case GgufType::INT64: o.put(i); break;
    case GgufType::BOOL: o.put(static_cast<uint8_t>(i != 0)); break;
    case GgufType::FLOAT32: o.put(static_cast<float>(f)); break;
    case GgufType::FLOAT64: o.put(f); break;
    case GgufType::STRING: o.str(s); break;
    case GgufType::ARRAY: fail("GGUF writer: nested arrays are not supported");
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne,
                            const void* data, size_t nbytes) {
  if (ne.empty() || ne.size() > 4) fail("GGUF writer: tensor '", name, "' needs 1 to 4 dims");
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d < 0) fail("GGUF writer: tensor '", name, "' has a negative dimension");
    n *= d;
  }
  const size_t expect = dtype_row_bytes(type, ne[0]) * static_cast<size_t>(n / std::max<int64_t>(ne[0], 1));
  if (ne[0] != 0 && expect != nbytes)
    fail("GGUF writer: tensor '", name, "' of ", dtype_name(type), " with ", n,
         " values needs ", expect, " bytes, got ", nbytes);
  for (const auto& t : tensors_)
    if (t.name == name) fail("GGUF writer: duplicate tensor '", name, "'");
  Tensor t{name, type, std::move(ne), {}};
  t.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + nbytes);
  tensors_.push_back(std::move(t));
}

void GgufWriter::write(const std::string& path, uint64_t alignment) const {
  std::vector<uint8_t> head;
  Out o(head);
  o.put<uint32_t>(0x46554747u);
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  bool has_align = false;
  for (const auto& [k, v] : kv_) has_align |= (k == "general.alignment");
  o.put<uint64_t>(kv_.size() + (has_align || alignment == 32 ? 0 : 1));
  for (const auto& [k, v] : kv_) {
    o.str(k);
    o.put<uint32_t>(static_cast<uint32_t>(v.type));
    if (v.type != GgufType::ARRAY) {
      put_scalar(o, v.type, v.i, v.f, v.s);
      continue;
    }
    o.put<uint32_t>(static_cast<uint32_t>(v.elem));
    o.put<uint64_t>(v.array_size());
    if (v.elem == GgufType::STRING)
      for (const auto& s : v.as) o.str(s);
    else if (v.elem == GgufType::FLOAT32 || v.elem == GgufType::FLOAT64)
      for (double f : v.af) put_scalar(o, v.elem, 0, f, {});
    else
      for (int64_t i : v.ai) put_scalar(o, v.elem, i, 0, {});
  }
  if (!has_align && alignment != 32) {
    o.str("general.alignment");
    o.put<uint32_t>(static_cast<uint32_t>(GgufType::UINT32));
    o.put<uint32_t>(static_cast<uint32_t>(alignment));
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    o.str(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) o.put<int64_t>(d);
    o.put<uint32_t>(static_cast<uint32_t>(t.type));
    o.put<uint64_t>(offset);
    offset += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  while (head.size() % alignment) head.push_back(0);

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, ": cannot write: ", std::strerror(errno));
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  static const uint8_t zeros[256] = {};
  for (const auto& t : tensors_) {
    ok = ok && std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    size_t pad = (alignment - t.data.size() % alignment) % alignment;
    while (ok && pad > 0) {
      const size_t k = std::min(pad, sizeof(zeros));
      ok = std::fwrite(zeros, 1, k, f) == k;
      pad -= k;
    }
  }
  ok = (std::fflush(f) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(path, ": write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(path, ": cannot rename the temporary file into place: ", ec.message());
}

}  // namespace cln
