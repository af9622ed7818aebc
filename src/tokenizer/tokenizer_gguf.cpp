// The tokenizer.ggml.* keys of a GGUF file: read into a Vocab, and written back the way
// llama.cpp's converters write them.
#include "clone/core/error.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln {

namespace {

// An optional token id. Writers store ids as UINT32, some with 0xFFFFFFFF for "none".
int32_t read_id(const GgufFile& f, std::string_view key, int32_t def) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  if (!v->is_int() || v->type == GgufType::BOOL)
    fail(f.path(), ": ", key, " has type ", gguf_type_name(v->type), ", expected an integer");
  if (v->i < 0 || v->i == 0xFFFFFFFF) return -1;
  if (v->i > INT32_MAX) fail(f.path(), ": ", key, " = ", v->i, " is not a token id");
  return static_cast<int32_t>(v->i);
}

bool read_bool(const GgufFile& f, std::string_view key, bool def) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  if (!v->is_int())
    fail(f.path(), ": ", key, " has type ", gguf_type_name(v->type), ", expected a bool");
  return v->i != 0;
}

const GgufValue* find_array(const GgufFile& f, std::string_view key, bool (*elem_ok)(GgufType),
                            const char* expected) {
  const GgufValue* v = f.find(key);
  if (!v) return nullptr;
  if (v->type != GgufType::ARRAY || !elem_ok(v->elem))
    fail(f.path(), ": ", key, " is ",
         v->type == GgufType::ARRAY ? "an array of " + std::string(gguf_type_name(v->elem))
                                    : std::string(gguf_type_name(v->type)),
         ", expected an array of ", expected);
  return v;
}

bool is_string(GgufType t) {
  return t == GgufType::STRING;
}
bool is_float(GgufType t) {
  return t == GgufType::FLOAT32 || t == GgufType::FLOAT64;
}
bool is_integer(GgufType t) {
  return t != GgufType::FLOAT32 && t != GgufType::FLOAT64 && t != GgufType::STRING &&
         t != GgufType::ARRAY && t != GgufType::BOOL;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& f) {
  const GgufValue* model = f.find("tokenizer.ggml.model");
  if (!model) fail(f.path(), ": no tokenizer (tokenizer.ggml.model is missing)");
  if (model->type != GgufType::STRING)
    fail(f.path(), ": tokenizer.ggml.model has type ", gguf_type_name(model->type),
         ", expected a string");
  if (model->s != "llama")
    fail(f.path(), ": tokenizer.ggml.model is \"", model->s,
         "\"; clone reads only SentencePiece-style \"llama\" vocabularies");

  const GgufValue* tokens = find_array(f, "tokenizer.ggml.tokens", is_string, "strings");
  if (!tokens) fail(f.path(), ": tokenizer.ggml.tokens is missing");
  const GgufValue* scores = find_array(f, "tokenizer.ggml.scores", is_float, "floats");
  const GgufValue* types = find_array(f, "tokenizer.ggml.token_type", is_integer, "integers");
  const size_t n = tokens->as.size();
  if (scores && scores->af.size() != n)
    fail(f.path(), ": tokenizer arrays disagree in length: ", n, " tokens but ", scores->af.size(),
         " scores");
  if (types && types->ai.size() != n)
    fail(f.path(), ": tokenizer arrays disagree in length: ", n, " tokens but ", types->ai.size(),
         " token types");

  Vocab v;
  v.tokens = tokens->as;
  v.scores.assign(n, 0.0f);
  v.types.assign(n, TokenType::Normal);
  for (size_t i = 0; i < n; ++i) {
    if (scores) v.scores[i] = static_cast<float>(scores->af[i]);
    if (types) {
      const int64_t t = types->ai[i];
      if (t < 0 || t > 6)
        fail(f.path(), ": tokenizer.ggml.token_type[", i, "] = ", t, " is not a token type");
      v.types[i] = static_cast<TokenType>(t);
    }
  }
  v.bos = read_id(f, "tokenizer.ggml.bos_token_id", 1);
  v.eos = read_id(f, "tokenizer.ggml.eos_token_id", 2);
  v.unk = read_id(f, "tokenizer.ggml.unknown_token_id", 0);
  v.pad = read_id(f, "tokenizer.ggml.padding_token_id", -1);
  v.add_bos = read_bool(f, "tokenizer.ggml.add_bos_token", true);
  v.add_space_prefix = read_bool(f, "tokenizer.ggml.add_space_prefix", true);
  try {
    return Tokenizer(std::move(v));
  } catch (const Error& e) {
    fail(f.path(), ": ", e.what());
  }
}

void Tokenizer::to_gguf(GgufWriter& w) const {
  std::vector<double> scores(v_.scores.begin(), v_.scores.end());
  std::vector<int64_t> types;
  types.reserve(v_.types.size());
  for (TokenType t : v_.types) types.push_back(static_cast<int64_t>(t));
  w.set("tokenizer.ggml.model", GgufValue::str("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::arr_str(v_.tokens));
  w.set("tokenizer.ggml.scores", GgufValue::arr_f32(std::move(scores)));
  w.set("tokenizer.ggml.token_type", GgufValue::arr_i32(std::move(types)));
  if (v_.bos >= 0)
    w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(v_.bos)));
  if (v_.eos >= 0)
    w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(v_.eos)));
  if (v_.unk >= 0)
    w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<uint32_t>(v_.unk)));
  if (v_.pad >= 0)
    w.set("tokenizer.ggml.padding_token_id", GgufValue::u32(static_cast<uint32_t>(v_.pad)));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(v_.add_bos));
  w.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
  w.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(v_.add_space_prefix));
}

}  // namespace cln
