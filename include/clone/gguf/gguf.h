// GGUF v3 (and v2) files: the reader memory-maps a file and validates every field
// before anything is used; the writer lays out a file that llama.cpp's reader accepts.
// Format facts (from the GGUF specification): little-endian; magic "GGUF"; version;
// tensor count and key/value count (u64); key/values; tensor infos (name, n_dims,
// dims ne[0..n), ggml type, offset relative to the data section); padding to
// general.alignment (default 32); tensor data, each tensor aligned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "clone/core/dtype.h"

namespace cln {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Scalars live in i (all integer kinds and bool; UINT64 as its
// bit pattern), f (FLOAT32/FLOAT64) or s (STRING). Arrays keep their element type in
// elem and their items in ai, af or as. Nested arrays are read and skipped (kept empty,
// elem = ARRAY): no Llama key uses them.
struct GgufValue {
  GgufType type = GgufType::UINT32;
  GgufType elem = GgufType::UINT32;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ai;
  std::vector<double> af;
  std::vector<std::string> as;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  static GgufValue arr_i32(std::vector<int64_t> v);
  static GgufValue arr_u32(std::vector<int64_t> v);
  static GgufValue arr_f32(std::vector<double> v);
  static GgufValue arr_str(std::vector<std::string> v);

  bool is_int() const;    // any integer kind or bool
  bool is_float() const;  // FLOAT32 or FLOAT64
  size_t array_size() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (row) dimension
  DType type = DType::F32;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;
  int64_t n_elements() const;
  int64_t rows() const;     // product of ne[1..]
};

class GgufFile {
 public:
  // Maps and validates a file. Throws cln::Error naming the file and what is wrong.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses a buffer the caller keeps alive (tests, fuzzing).
  static std::shared_ptr<GgufFile> parse(const uint8_t* data, size_t size, std::string name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: throw if the key is missing or of the wrong kind.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  // accepts integers too
  // Per-layer or scalar integer: an array of n, or one value repeated n times.
  std::vector<int64_t> get_int_per_layer(std::string_view key, size_t n) const;
  std::string get_string_or(std::string_view key, std::string def) const;
  int64_t get_int_or(std::string_view key, int64_t def) const;
  double get_float_or(std::string_view key, double def) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& t) const { return data_ + data_offset_ + t.offset; }

 private:
  GgufFile() = default;
  void parse_all();

  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

// Writes GGUF v3. Keys keep insertion order (setting a key again replaces it).
// Tensor data is copied when added, so the source may go away.
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue v);
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data,
                  size_t nbytes);
  // Writes to path + ".tmp" then renames, so a reader never sees a half-written file.
  void write(const std::string& path, uint64_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace cln
