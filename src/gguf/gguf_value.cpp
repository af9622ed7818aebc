// GgufValue constructors and GgufFile's typed metadata getters.
#include <algorithm>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"

namespace cln {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "uint8";
    case GgufType::INT8: return "int8";
    case GgufType::UINT16: return "uint16";
    case GgufType::INT16: return "int16";
    case GgufType::UINT32: return "uint32";
    case GgufType::INT32: return "int32";
    case GgufType::FLOAT32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "uint64";
    case GgufType::INT64: return "int64";
    case GgufType::FLOAT64: return "float64";
  }
  return "?";
}

GgufValue GgufValue::u32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::UINT32;
  x.i = v;
  return x;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue x;
  x.type = GgufType::INT32;
  x.i = v;
  return x;
}
GgufValue GgufValue::u64(uint64_t v) {
  GgufValue x;
  x.type = GgufType::UINT64;
  x.i = static_cast<int64_t>(v);
  return x;
}
GgufValue GgufValue::f32(float v) {
  GgufValue x;
  x.type = GgufType::FLOAT32;
  x.f = v;
  return x;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue x;
  x.type = GgufType::BOOL;
  x.i = v ? 1 : 0;
  return x;
}
GgufValue GgufValue::str(std::string v) {
  GgufValue x;
  x.type = GgufType::STRING;
  x.s = std::move(v);
  return x;
}
GgufValue GgufValue::arr_i32(std::vector<int64_t> v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem = GgufType::INT32;
  x.ai = std::move(v);
  return x;
}
GgufValue GgufValue::arr_u32(std::vector<int64_t> v) {
  GgufValue x = arr_i32(std::move(v));
  x.elem = GgufType::UINT32;
  return x;
}
GgufValue GgufValue::arr_f32(std::vector<double> v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem = GgufType::FLOAT32;
  x.af = std::move(v);
  return x;
}
GgufValue GgufValue::arr_str(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem = GgufType::STRING;
  x.as = std::move(v);
  return x;
}

static bool int_kind(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
    case GgufType::BOOL:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_int() const { return int_kind(type); }
bool GgufValue::is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }

size_t GgufValue::array_size() const {
  if (type != GgufType::ARRAY) return 0;
  return std::max({ai.size(), af.size(), as.size()});
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

int64_t GgufTensorInfo::rows() const {
  int64_t n = 1;
  for (size_t k = 1; k < ne.size(); ++k) n *= ne[k];
  return n;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

static const GgufValue& need(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (!v) fail(f.path(), ": missing metadata key '", key, "'");
  return *v;
}

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = need(*this, key);
  if (v.type != GgufType::STRING)
    fail(name_, ": key '", key, "' is ", gguf_type_name(v.type), ", expected string");
  return v.s;
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue& v = need(*this, key);
  if (!v.is_int())
    fail(name_, ": key '", key, "' is ", gguf_type_name(v.type), ", expected an integer");
  return v.i;
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue& v = need(*this, key);
  if (v.is_float()) return v.f;
  if (v.is_int()) return static_cast<double>(v.i);
  fail(name_, ": key '", key, "' is ", gguf_type_name(v.type), ", expected a number");
}

std::vector<int64_t> GgufFile::get_int_per_layer(std::string_view key, size_t n) const {
  const GgufValue& v = need(*this, key);
  if (v.is_int()) return std::vector<int64_t>(n, v.i);
  if (v.type == GgufType::ARRAY && int_kind(v.elem)) {
    if (v.ai.size() != n)
      fail(name_, ": key '", key, "' has ", v.ai.size(), " entries but the model has ", n,
           " layers");
    return v.ai;
  }
  fail(name_, ": key '", key, "' must be an integer or an array of integers, not ",
       gguf_type_name(v.type));
}

std::string GgufFile::get_string_or(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : def;
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t def) const {
  return has(key) ? get_int(key) : def;
}
double GgufFile::get_float_or(std::string_view key, double def) const {
  return has(key) ? get_float(key) : def;
}

}  // namespace cln
