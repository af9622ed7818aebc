// The GGUF reader: maps the file read-only and checks every count, length, dimension
// and offset against the bytes that are really there before trusting it, so a
// truncated or corrupted file fails with a message instead of a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"

namespace cln {
namespace {

constexpr uint64_t kMaxDims = 4;  // GGML_MAX_DIMS

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& name) : p_(p), n_(n), name_(name) {}
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

  template <typename T>
  T get(const char* what) {
    if (left() < sizeof(T))
      fail(name_, ": truncated at byte ", pos_, " while reading ", what, " (file has ", n_,
           " bytes)");
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string str(const char* what) {
    const uint64_t len = get<uint64_t>(what);
    if (len > left())
      fail(name_, ": ", what, " claims ", len, " bytes at byte ", pos_, " but only ", left(),
           " remain");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& name_;
};

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: return 8;  // at least its length field
    case GgufType::ARRAY: return 12;  // at least type + count
  }
  return 0;
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

void read_scalar(Cursor& c, GgufType t, GgufValue& v, const char* what) {
  switch (t) {
    case GgufType::UINT8: v.i = c.get<uint8_t>(what); break;
    case GgufType::INT8: v.i = c.get<int8_t>(what); break;
    case GgufType::UINT16: v.i = c.get<uint16_t>(what); break;
    case GgufType::INT16: v.i = c.get<int16_t>(what); break;
    case GgufType::UINT32: v.i = c.get<uint32_t>(what); break;
    case GgufType::INT32: v.i = c.get<int32_t>(what); break;
    case GgufType::UINT64: v.i = static_cast<int64_t>(c.get<uint64_t>(what)); break;
    case GgufType::INT64: v.i = c.get<int64_t>(what); break;
    case GgufType::BOOL: v.i = c.get<uint8_t>(what) != 0; break;
    case GgufType::FLOAT32: v.f = c.get<float>(what); break;
    case GgufType::FLOAT64: v.f = c.get<double>(what); break;
    case GgufType::STRING: v.s = c.str(what); break;
    case GgufType::ARRAY: break;
  }
}

void read_value(Cursor& c, GgufType t, GgufValue& v, const std::string& key,
                const std::string& name, int depth) {
  v.type = t;
  if (t != GgufType::ARRAY) {
    read_scalar(c, t, v, key.c_str());
    return;
  }
  const uint32_t et = c.get<uint32_t>("array element type");
  if (!valid_type(et)) fail(name, ": key '", key, "' is an array of unknown type id ", et);
  v.elem = static_cast<GgufType>(et);
  const uint64_t n = c.get<uint64_t>("array length");
  if (n > c.left() / scalar_size(v.elem))
    fail(name, ": key '", key, "' claims ", n, " array items but only ", c.left(),
         " bytes remain");
  if (depth > 0 && v.elem == GgufType::ARRAY)
    fail(name, ": key '", key, "' nests arrays more than two deep");
  for (uint64_t k = 0; k < n; ++k) {
    GgufValue item;
    read_value(c, v.elem, item, key, name, depth + 1);
    switch (v.elem) {
      case GgufType::STRING: v.as.push_back(std::move(item.s)); break;
      case GgufType::FLOAT32: case GgufType::FLOAT64: v.af.push_back(item.f); break;
      case GgufType::ARRAY: break;  // nested arrays are read and dropped
      default: v.ai.push_back(item.i); break;
    }
  }
}

}  // namespace

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(path, ": empty file, not GGUF");
  }
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) fail(path, ": mmap failed: ", std::strerror(errno));
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->name_ = path;
  f->data_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  f->mapped_ = true;
  f->parse_all();  // on throw, the destructor unmaps
  return f;
}

std::shared_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::string name) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->name_ = std::move(name);
  f->data_ = data;
  f->size_ = size;
  f->parse_all();
  return f;
}

GgufFile::~GgufFile() {
  if (mapped_ && data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void GgufFile::parse_all() {
  Cursor c(data_, size_, name_);
  const uint32_t magic = c.get<uint32_t>("magic");
  if (magic != 0x46554747u)  // "GGUF" little-endian
    fail(name_, ": not a GGUF file (magic bytes are not 'GGUF')");
  version_ = c.get<uint32_t>("version");
  if (version_ == 0x03000000u || version_ == 0x02000000u)
    fail(name_, ": big-endian GGUF is not supported");
  if (version_ != 2 && version_ != 3)
    fail(name_, ": GGUF version ", version_, " is not supported (2 and 3 are)");
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata count");
  // Each key/value takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor info 8+4+8+4+8.
  if (n_kv > c.left() / 13) fail(name_, ": metadata count ", n_kv, " exceeds the file size");
  if (n_tensors > c.left() / 32) fail(name_, ": tensor count ", n_tensors, " exceeds the file size");

  std::unordered_set<std::string> seen;
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.str("metadata key");
    if (!seen.insert(key).second) fail(name_, ": duplicate metadata key '", key, "'");
    const uint32_t t = c.get<uint32_t>("metadata value type");
    if (!valid_type(t)) fail(name_, ": key '", key, "' has unknown value type id ", t);
    GgufValue v;
    read_value(c, static_cast<GgufType>(t), v, key, name_, 0);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_int() || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20))
      fail(name_, ": general.alignment must be a power of two, got ", a->i);
    alignment_ = static_cast<uint64_t>(a->i);
  }

  seen.clear();
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.str("tensor name");
    if (!seen.insert(t.name).second) fail(name_, ": duplicate tensor '", t.name, "'");
    const uint32_t nd = c.get<uint32_t>("tensor dimension count");
    if (nd == 0 || nd > kMaxDims)
      fail(name_, ": tensor '", t.name, "' has ", nd, " dimensions (1 to 4 allowed)");
    uint64_t count = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const int64_t ne = c.get<int64_t>("tensor dimension");
      if (ne < 0) fail(name_, ": tensor '", t.name, "' has negative dimension ", ne);
      if (ne != 0 && count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                                 static_cast<uint64_t>(ne))
        fail(name_, ": tensor '", t.name, "' has dimensions whose product overflows");
      count *= static_cast<uint64_t>(ne);
      t.ne.push_back(ne);
    }
    const uint32_t type = c.get<uint32_t>("tensor type");
    if (!dtype_supported(type))
      fail(name_, ": tensor '", t.name, "' has ggml type id ", type,
           ", which clone does not support (f32, f16, q8_0, q4_0)");
    t.type = static_cast<DType>(type);
    if (t.ne[0] % dtype_block_size(t.type) != 0)
      fail(name_, ": tensor '", t.name, "' row of ", t.ne[0], " values is not a whole number of ",
           dtype_name(t.type), " blocks");
    t.offset = c.get<uint64_t>("tensor offset");
    const uint64_t blocks = count / static_cast<uint64_t>(dtype_block_size(t.type));
    if (blocks > std::numeric_limits<uint64_t>::max() / dtype_block_bytes(t.type))
      fail(name_, ": tensor '", t.name, "' size overflows");
    t.nbytes = blocks * dtype_block_bytes(t.type);
    tensors_.push_back(std::move(t));
  }

  const uint64_t pos = c.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_)
    fail(name_, ": truncated: tensor data would start at byte ", data_offset_, " but the file has ",
         size_, " bytes");
  const uint64_t data_size = data_offset_ <= size_ ? size_ - data_offset_ : 0;
  for (const auto& t : tensors_) {
    if (t.offset % alignment_ != 0)
      fail(name_, ": tensor '", t.name, "' offset ", t.offset, " is not aligned to ", alignment_);
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail(name_, ": tensor '", t.name, "' (", t.nbytes, " bytes at offset ", t.offset,
           ") runs past the end of the file (data section has ", data_size,
           " bytes): truncated or corrupted");
  }
}

}  // namespace cln
