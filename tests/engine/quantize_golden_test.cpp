// clone's quantizer against llama.cpp's: golden-*-q8_0.gguf and golden-*-q4_0.gguf were
// written by `llama-quantize --pure` from the golden F32 files (shared/data/golden-gguf).
// --pure quantizes every 2-D weight matrix (token_embd and output included) to the one
// type and leaves the 1-D norms in F32, so quantize_model must give, tensor for tensor,
// the same names, types, shapes and bytes. Only the tensors are compared: the metadata
// (general.file_type, llama.cpp's quantize.* keys) is the writer's business.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "clone/engine/model_writer.h"
#include "clone/gguf/gguf.h"

using namespace cln;

namespace {

std::string golden(const std::string& f) {
  return std::string(CLONE_SHARED_DIR) + "/data/golden-gguf/" + f;
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("clone_quant_golden_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

struct Case {
  const char* f32;
  const char* quantized;
  DType type;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.quantized;
}

class QuantizeGolden : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(QuantizeGolden, EveryTensorIsByteIdenticalToLlamaQuantizePure) {
  const Case c = GetParam();
  const auto src = GgufFile::open(golden(c.f32));
  const auto want = GgufFile::open(golden(c.quantized));
  const std::string out = tmp_path(c.quantized);
  EXPECT_EQ(quantize_model(*src, c.type, out), 0);  // every golden row is whole blocks
  const auto got = GgufFile::open(out);
  std::filesystem::remove(out);

  ASSERT_EQ(got->tensors().size(), want->tensors().size());
  int n_quantized = 0, n_f32 = 0;
  for (const GgufTensorInfo& w : want->tensors()) {
    SCOPED_TRACE(w.name);
    const GgufTensorInfo* g = got->find_tensor(w.name);
    ASSERT_NE(g, nullptr) << "missing in clone's output";
    EXPECT_EQ(g->type, w.type);
    EXPECT_EQ(g->ne, w.ne);
    ASSERT_EQ(g->nbytes, w.nbytes);
    // The first differing byte, so a failure says which block and which field.
    const uint8_t *a = got->tensor_data(*g), *b = want->tensor_data(w);
    const auto diff = std::mismatch(a, a + g->nbytes, b).first - a;
    EXPECT_EQ(static_cast<uint64_t>(diff), g->nbytes)
        << "first differing byte " << diff << " of " << g->nbytes << ": clone " << int{a[diff]}
        << ", llama-quantize " << int{b[diff]};
    (w.type == c.type ? n_quantized : n_f32) += 1;
    // --pure: matrices in the target type, vectors left in F32.
    EXPECT_EQ(w.type, w.ne.size() == 2 ? c.type : DType::F32);
  }
  // The test means something only if both kinds were there.
  EXPECT_GT(n_quantized, 10);
  EXPECT_GT(n_f32, 4);
}

INSTANTIATE_TEST_SUITE_P(
    LlamaCpp, QuantizeGolden,
    ::testing::Values(Case{"golden-f32.gguf", "golden-q8_0.gguf", DType::Q8_0},
                      Case{"golden-f32.gguf", "golden-q4_0.gguf", DType::Q4_0},
                      Case{"golden-per-layer-f32.gguf", "golden-per-layer-q8_0.gguf", DType::Q8_0},
                      Case{"golden-per-layer-f32.gguf", "golden-per-layer-q4_0.gguf", DType::Q4_0}),
    [](const auto& param_info) {
      std::string n = param_info.param.quantized;
      n = n.substr(0, n.find('.'));
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });
