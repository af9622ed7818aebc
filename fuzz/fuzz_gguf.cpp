// libFuzzer entry: any byte string either parses into a GGUF whose every tensor lies
// inside the buffer and whose metadata can be read, or fails with cln::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = cln::GgufFile::parse(data, size, "fuzz");
    for (const auto& t : f->tensors()) {
      const uint8_t* p = f->tensor_data(t);
      if (p < data || p + t.nbytes > data + size) std::abort();
      volatile uint8_t sink = t.nbytes ? p[t.nbytes - 1] : 0;
      (void)sink;
    }
    for (const auto& [k, v] : f->metadata()) {
      if (v.is_int()) (void)f->get_int(k);
      if (v.type == cln::GgufType::STRING) (void)f->get_string(k);
    }
  } catch (const cln::Error&) {
  }
  return 0;
}
