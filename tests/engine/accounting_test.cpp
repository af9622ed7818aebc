// The schema and the one accounting against counts written here independently: from the
// tensor shapes a GGUF file actually holds (parameters, bytes, matmul FLOPs) and by hand
// (attention pairs, a training step), on a deci model with a zero-head and a zero-FFN layer.
#include <gtest/gtest.h>

#include <set>

#include "clone/core/error.h"
#include "clone/engine/accounting.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"
#include "clone/engine/schema.h"
#include "test_util.h"

using namespace cln;

namespace {

// Per GGUF tensor: element count and bytes, as the file stores them.
struct FileCount {
  int64_t params = 0;
  double bytes = 0;
  std::map<int64_t, int64_t> layer_matrix_params;  // by layer: 2-D blk.* tensors
  int64_t head_params = 0;
};

FileCount count_file(const GgufFile& f) {
  FileCount c;
  for (const auto& t : f.tensors()) {
    c.params += t.n_elements();
    c.bytes += static_cast<double>(t.nbytes);
    if (t.name.rfind("blk.", 0) == 0 && t.ne.size() == 2)
      c.layer_matrix_params[std::stoll(t.name.substr(4))] += t.n_elements();
    if (t.name == "output.weight") c.head_params = t.n_elements();
  }
  return c;
}

}  // namespace

TEST(Schema, NamesShapesAndParsing) {
  EXPECT_EQ(layer_tensor_name(3, LayerMatrix::O), "blk.3.attn_output.weight");
  EXPECT_EQ(layer_norm_name(0, LayerNorm::Ffn), "blk.0.ffn_norm.weight");
  EXPECT_EQ(layer_matrix_from_name("gate"), LayerMatrix::Gate);
  EXPECT_EQ(layer_matrix_from_name("attn_v"), LayerMatrix::V);
  EXPECT_THROW(layer_matrix_from_name("qkv"), Error);
  const auto p = parse_layer_tensor_name("blk.12.ffn_down.weight");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->first, 12);
  EXPECT_EQ(p->second, LayerMatrix::Down);
  for (const char* bad : {"blk.x.attn_q.weight", "blk.1.attn_q.bias", "blk..attn_q.weight",
                          "blk.1.attn_norm.weight", "token_embd.weight", "blk.-1.attn_q.weight"})
    EXPECT_FALSE(parse_layer_tensor_name(bad).has_value()) << bad;
}

TEST(Schema, MatchesWhatInitModelWritesAndTheLoaderReads) {
  ModelConfig c = test::per_layer_config();
  const std::string path = test::tmp_path("schema.gguf");
  init_model(c, {1, DType::F32, 0.02f}, nullptr, path);
  const auto f = GgufFile::open(path);
  const std::vector<TensorSpec> specs = model_tensors(c);
  ASSERT_EQ(specs.size(), f->tensors().size());
  for (size_t i = 0; i < specs.size(); ++i) {  // same names, same order, same shapes
    EXPECT_EQ(specs[i].name, f->tensors()[i].name);
    EXPECT_EQ(specs[i].ne(), f->tensors()[i].ne) << specs[i].name;
  }
  // Layer 2 has no attention, layer 3 no FFN: their tensors are absent.
  EXPECT_EQ(find_spec(specs, "blk.2.attn_q.weight"), nullptr);
  EXPECT_EQ(find_spec(specs, "blk.2.attn_norm.weight"), nullptr);
  EXPECT_EQ(find_spec(specs, "blk.3.ffn_up.weight"), nullptr);
  ASSERT_NE(find_spec(specs, "blk.3.attn_output.weight"), nullptr);
  EXPECT_EQ(find_spec(specs, "blk.3.attn_output.weight")->cols, 3 * 16);
  c.tied_output = true;
  EXPECT_EQ(find_spec(model_tensors(c), "output.weight"), nullptr);
}

TEST(Accounting, ParamsAndBytesEqualTheFilesTensors) {
  ModelConfig c = test::per_layer_config();
  c.head_dim_k = c.head_dim_v = 32;  // whole Q8_0 blocks except layer 3's 3 heads... of 32: whole
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    const std::string path =
        test::tmp_path(std::string("acct_") + std::string(dtype_name(t)) + ".gguf");
    init_model(c, {2, t, 0.02f}, nullptr, path);
    const auto m = Model::load(path, false);
    const FileCount fc = count_file(m->gguf());
    EXPECT_EQ(m->config().n_params(), fc.params) << dtype_name(t);
    EXPECT_DOUBLE_EQ(model_weight_bytes(m->config()), fc.bytes) << dtype_name(t);
    for (int64_t il = 0; il < c.n_layer(); ++il)
      EXPECT_EQ(layer_params(m->config(), il).matrices(), fc.layer_matrix_params.at(il)) << il;
  }
}

TEST(Accounting, PassFlopsFromTheFileShapesAndByHand) {
  const ModelConfig c = test::per_layer_config();
  const std::string path = test::tmp_path("acct_pass.gguf");
  init_model(c, {2, DType::F32, 0.02f}, nullptr, path);
  const auto m = Model::load(path, false);
  const FileCount fc = count_file(m->gguf());
  const int64_t n = 7, pos = 5;
  double matmul = 0, attn = 0;
  for (int64_t il = 0; il < c.n_layer(); ++il) {
    const PassCount p = layer_pass(m->config(), il, pos, n);
    EXPECT_DOUBLE_EQ(p.matmul_flops, 2.0 * n * static_cast<double>(fc.layer_matrix_params.at(il)));
    matmul += p.matmul_flops;
    attn += p.attn_flops;
  }
  // Attention: token t of the pass sees pos + t + 1 positions: sum = n*pos + n(n+1)/2 pairs,
  // 2 * heads * (dk + dv) FLOPs each. Heads per layer: 4, 2, 0, 3, 4; dk = dv = 16.
  const double pairs = n * pos + n * (n + 1) / 2.0;
  EXPECT_DOUBLE_EQ(attn, 2.0 * (4 + 2 + 0 + 3 + 4) * 32 * pairs);
  // The head computes logits only for the tokens asked for: a prefill's last token.
  const PassCount h1 = head_pass(m->config(), n, 1), hn = head_pass(m->config(), n, n);
  EXPECT_DOUBLE_EQ(h1.matmul_flops, 2.0 * static_cast<double>(fc.head_params));
  EXPECT_DOUBLE_EQ(hn.matmul_flops, 2.0 * n * static_cast<double>(fc.head_params));
  const PassCount all = forward_pass(m->config(), pos, n, 1);
  EXPECT_DOUBLE_EQ(all.matmul_flops, matmul + h1.matmul_flops);
  // Decode streams every weight once, the embedding but one row.
  const double emb_row = static_cast<double>(c.n_embd) * 4;
  EXPECT_DOUBLE_EQ(decode_weight_bytes(m->config()),
                   fc.bytes - static_cast<double>(c.n_vocab * c.n_embd) * 4 + emb_row);
}

TEST(Accounting, TrainingStepCountsMatricesAndCausalAttention) {
  ModelConfig c;
  c.n_vocab = 100, c.n_embd = 8, c.n_ctx_train = 4, c.head_dim_k = c.head_dim_v = 4;
  c.layers = {{2, 1, 16}};
  // matrices: q 8x8, k 4x8, v 4x8, o 8x8, 3 x 16x8, head 100x8; 6 FLOPs per weight per
  // token; attention 3 x (2 heads x 2 x (4 + 4)) per pair, 4*5/2 pairs.
  const double matrix = 64 + 32 + 32 + 64 + 3 * 128 + 800;
  const double attn = 3.0 * 2.0 * 2 * (4.0 * 5 / 2) * (4 + 4);
  EXPECT_DOUBLE_EQ(train_step_flops(c, 1, 4), 6.0 * matrix * 4 + attn);
  EXPECT_DOUBLE_EQ(train_step_flops(c, 3, 4), 3 * (6.0 * matrix * 4 + attn));
}
