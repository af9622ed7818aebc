// The router: weights against a softmax computed by hand, keys that survive a round trip
// through the adapter file (which still loads), the base-model embedding against an
// independent PyTorch forward cut after k layers, and TF-IDF against counts by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "clone/core/error.h"
#include "clone/data/token_file.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"
#include "clone/serve/embed.h"
#include "clone/serve/route_eval.h"
#include "clone/serve/router.h"
#include "clone/tokenizer/tokenizer.h"
#include "engine/test_util.h"

namespace cln::serve {
namespace {

TEST(Router, SoftmaxOfCosinesByHand) {
  const float r2 = static_cast<float>(1 / std::sqrt(2.0));
  const std::vector<ExpertKey> keys = {{"e", {1, 0}, 1}, {"e", {0, 2}, 1}, {"e", {r2, r2}, 1}};
  const std::vector<float> x = {3, 0};  // cosines 1, 0, 0.7071
  RouterOptions o;
  o.temperature = 0.5;
  o.threshold = 0.0;
  const std::vector<double> w = Router(keys, o).weights(x);
  const double a = 1, b = std::exp(-2.0), c = std::exp((std::sqrt(0.5) - 1) / 0.5);
  EXPECT_NEAR(w[0], a / (a + b + c), 1e-12);
  EXPECT_NEAR(w[1], b / (a + b + c), 1e-12);
  EXPECT_NEAR(w[2], c / (a + b + c), 1e-12);
  // A threshold above the smallest weight drops it and renormalises the rest.
  o.threshold = 0.15;  // w[1] = 0.082
  const std::vector<double> t = Router(keys, o).weights(x);
  EXPECT_EQ(t[1], 0.0);
  EXPECT_NEAR(t[0], a / (a + c), 1e-12);
  o.mixing = Mixing::Top1;
  EXPECT_EQ(Router(keys, o).weights(x), (std::vector<double>{1, 0, 0}));
  o.mixing = Mixing::Uniform;
  EXPECT_EQ(Router(keys, o).weights(x), (std::vector<double>{1 / 3.0, 1 / 3.0, 1 / 3.0}));
  // Scaled to the largest: the same proportions, the top expert at 1.
  o.mixing = Mixing::Soft, o.threshold = 0, o.scale_to_max = true;
  const std::vector<double> m = Router(keys, o).weights(x);
  EXPECT_NEAR(m[0], 1.0, 1e-12);
  EXPECT_NEAR(m[1], b / a, 1e-12);
  EXPECT_NEAR(m[2], c / a, 1e-12);
  // Keys from different embeddings do not mix.
  EXPECT_THROW(Router({{"hidden:4", {1, 0}, 1}, {"tfidf", {1, 0}, 1}}), Error);
}

// Centring by hand: keys (10, 1, 0) and (10, 0, 1) share a large first component; their mean
// is (10, 0.5, 0.5), so centred they are (0, 0.5, -0.5) and (0, -0.5, 0.5). A prompt at
// (10, 0.8, 0.2) has raw cosines 0.9968 and 0.9941 (a flat softmax) but centred ones +1 and -1.
TEST(Router, CentringComparesWhatTellsExpertsApart) {
  const std::vector<ExpertKey> keys = {{"e", {10, 1, 0}, 1}, {"e", {10, 0, 1}, 1}};
  const std::vector<float> x = {10, 0.8f, 0.2f};
  RouterOptions o;
  o.temperature = 0.5, o.threshold = 0;
  const std::vector<double> raw = Router(keys, o).similarities(x);
  EXPECT_NEAR(raw[0], (100 + 0.8) / std::sqrt(101.0 * (100 + 0.64 + 0.04)), 1e-6);
  o.centre = true;
  const Router centred(keys, o);
  const std::vector<double> c = centred.similarities(x);
  EXPECT_NEAR(c[0], 1.0, 1e-6);
  EXPECT_NEAR(c[1], -1.0, 1e-6);
  const std::vector<double> w = centred.weights(x);
  EXPECT_NEAR(w[0], 1 / (1 + std::exp(-2.0 / 0.5)), 1e-6);
  // One expert has nothing to be told apart from.
  EXPECT_THROW(Router({{"e", {1, 0}, 1}}, o), Error);
}

// Naive Bayes by hand: a prompt's similarity to an expert is the mean log-probability of its
// tokens (BOS not counted) under the expert's unigram key, the weights a softmax of those.
TEST(Router, UnigramWeighsExpertsByTheMeanLogLikelihoodOfThePrompt) {
  const int32_t bos = 1;
  UnigramEmbedder e(4, bos);
  const std::vector<float> f = e.embed(std::vector<int32_t>{bos, 2, 2, 3});
  EXPECT_EQ(f, (std::vector<float>{0, 0, 2.0f / 3, 1.0f / 3}));
  const auto lg = [](double p) { return static_cast<float>(std::log(p)); };
  const std::vector<ExpertKey> keys = {
      {"unigram", {lg(0.1), lg(0.1), lg(0.7), lg(0.1)}, 1},  // likes token 2
      {"unigram", {lg(0.1), lg(0.1), lg(0.1), lg(0.7)}, 1},  // likes token 3
      {"unigram", {lg(0.25), lg(0.25), lg(0.25), lg(0.25)}, 1}};
  RouterOptions o;
  o.temperature = 0.2, o.threshold = 0;
  const Router r(keys, o);
  const double s0 = (2 * std::log(0.7) + std::log(0.1)) / 3,
               s1 = (2 * std::log(0.1) + std::log(0.7)) / 3, s2 = std::log(0.25);
  const std::vector<double> s = r.similarities(f);
  EXPECT_NEAR(s[0], s0, 1e-6);
  EXPECT_NEAR(s[1], s1, 1e-6);
  EXPECT_NEAR(s[2], s2, 1e-6);
  const std::vector<double> w = r.weights(f);
  const double a = std::exp(s0 / 0.2), b = std::exp(s1 / 0.2), c = std::exp(s2 / 0.2);
  EXPECT_NEAR(w[0], a / (a + b + c), 1e-6);
  EXPECT_NEAR(w[1], b / (a + b + c), 1e-6);
  EXPECT_NEAR(w[2], c / (a + b + c), 1e-6);
  o.centre = true;
  EXPECT_THROW(Router(keys, o), Error);  // centring is for cosines
  EXPECT_THROW(e.embed(std::vector<int32_t>{bos}), Error);
  EXPECT_THROW(e.embed(std::vector<int32_t>{bos, 4}), Error);  // outside the vocabulary
}

TEST(Router, KeyRoundTripKeepsTheAdapter) {
  const ModelConfig c = test::per_layer_config();
  const std::string model = test::tmp_path("router_model.gguf");
  init_model(c, {5, DType::F32, 0.05f}, nullptr, model);
  const std::string ad =
      test::random_adapter(c, {LayerMatrix::Q, LayerMatrix::Down}, 4, 8.0f, 3, "router_ad.gguf");
  const auto before = GgufFile::open(ad);
  std::vector<std::vector<uint8_t>> bytes;
  for (const auto& t : before->tensors())
    bytes.emplace_back(before->tensor_data(t), before->tensor_data(t) + t.nbytes);
  const ExpertKey key{"hidden:2", {0.5f, -1.25f, 3.0f}, 17};
  write_key(ad, key);
  const auto after = GgufFile::open(ad);
  const auto back = read_key(*after);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->embedder, "hidden:2");
  EXPECT_EQ(back->key, key.key);
  EXPECT_EQ(back->prompts, 17);
  ASSERT_EQ(after->tensors().size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto& t = after->tensors()[i];
    EXPECT_EQ(0, std::memcmp(after->tensor_data(t), bytes[i].data(), t.nbytes)) << t.name;
  }
  EXPECT_NO_THROW(LoraAdapter::load(ad, *Model::load(model)));
  EXPECT_TRUE(back->tfidf_key.empty());
  // A TF-IDF half is written with the key, and kept when a key without one is written later
  // (it belongs to the bank the adapter was keyed in).
  ExpertKey both = key;
  both.tfidf_idf = {1.5f, 2.0f, 1.0f, 3.0f};
  both.tfidf_key = {0.0f, 0.6f, 0.8f, 0.0f};
  write_key(ad, both);
  ExpertKey newer = key;
  newer.key = {1.0f, 2.0f, 3.0f};
  write_key(ad, newer);
  const auto kept = read_key(*GgufFile::open(ad));
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->key, newer.key);
  EXPECT_EQ(kept->tfidf_idf, both.tfidf_idf);
  EXPECT_EQ(kept->tfidf_key, both.tfidf_key);
  EXPECT_EQ(tfidf_router_keys({*kept})[0].key, both.tfidf_key);
  EXPECT_THROW(tfidf_router_keys({*kept, key}), Error);  // the second has no TF-IDF half
  ExpertKey odd = both;
  odd.tfidf_key.pop_back();
  EXPECT_THROW(write_key(ad, odd), Error);  // a key of another length than its idf
  // A unigram part is written beside the others and kept like the TF-IDF half.
  ExpertKey uni = newer;
  uni.unigram_logp = {-1.0f, -2.0f, -0.5f};
  write_key(ad, uni);
  write_key(ad, newer);
  const auto with_uni = read_key(*GgufFile::open(ad));
  ASSERT_TRUE(with_uni.has_value());
  EXPECT_EQ(with_uni->unigram_logp, uni.unigram_logp);
  EXPECT_EQ(with_uni->tfidf_key, both.tfidf_key);
  const auto u = unigram_router_keys({*with_uni, *with_uni});
  EXPECT_EQ(u[0].embedder, "unigram");
  EXPECT_EQ(u[0].key, uni.unigram_logp);
  EXPECT_THROW(unigram_router_keys({*with_uni, key}), Error);  // the second has none
  uni.unigram_logp[1] = 0.25f;                                 // not a log-probability
  write_key(ad, uni);
  EXPECT_THROW(read_key(*GgufFile::open(ad)), Error);
  write_key(ad, newer);
  EXPECT_THROW(read_key(*GgufFile::open(ad)), Error);  // kept as it was
  EXPECT_NO_THROW(LoraAdapter::load(ad, *Model::load(model)));
  EXPECT_FALSE(read_key(*GgufFile::open(model)).has_value());
  EXPECT_THROW(write_key(model, key), Error);  // not an adapter
}

TEST(Embed, HiddenStatesEqualPyTorchCutAfterKLayers) {
  if (!std::filesystem::exists(CLONE_PYTHON)) GTEST_SKIP() << CLONE_PYTHON << " not found";
  const ModelConfig c = test::per_layer_config();
  const std::string model = test::tmp_path("router_hidden.gguf");
  init_model(c, {9, DType::F32, 0.08f}, nullptr, model);
  const std::vector<int32_t> toks = {1, 17, 250, 3, 99, 42, 7, 128, 5};
  const std::string tok_file = test::tmp_path("router_tokens.txt");
  {
    std::ofstream f(tok_file);
    for (int32_t t : toks) f << t << " ";
  }
  const auto m = Model::load(model);
  for (int64_t k : {0, 1, 3, 5}) {
    const std::string out = test::tmp_path("router_hidden.bin");
    const std::string cmd = "HIDDEN_LAYERS=" + std::to_string(k) + " " + CLONE_PYTHON + " " +
                            CLONE_SOURCE_DIR + "/tests/engine/torch_reference.py " + model + " " +
                            tok_file + " " + out;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(out, std::ios::binary);
    std::vector<double> ref(static_cast<size_t>(c.n_embd));
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 8));
    ASSERT_TRUE(in.good());
    Context ctx(m, {16, 1, 4});  // passes of 4 tokens: the mean spans passes
    const std::vector<float> got = ctx.mean_hidden(toks, k);
    double worst = 0, mag = 0;
    for (size_t j = 0; j < ref.size(); ++j)
      worst = std::max(worst, std::fabs(got[j] - ref[j])), mag = std::max(mag, std::fabs(ref[j]));
    EXPECT_LT(worst, 1e-5 * std::max(1.0, mag)) << "k = " << k;
    EXPECT_EQ(ctx.n_past(), 0);
  }
}

// make_unigram_keys counts the first unigram_head_tokens of every training document (BOS not
// counted), add-0.1 smoothed over the vocabulary, on token files written here.
TEST(Router, UnigramKeysCountTheHeadsOfEachTrainingDocument) {
  const std::string base = std::string(CLONE_SOURCE_DIR) + "/models/base/model.gguf";
  const Tokenizer tok = Tokenizer::from_gguf(Model::load(base)->gguf());
  const std::string dir = test::tmp_path("unigram_data");
  std::filesystem::create_directories(dir + "/tokens");
  const auto bos = static_cast<uint16_t>(tok.bos()), eos = static_cast<uint16_t>(tok.eos());
  data::TokenFile code, quotes;
  code.n_vocab = quotes.n_vocab = static_cast<uint32_t>(tok.n_vocab());
  code.fingerprint = quotes.fingerprint = data::vocab_fingerprint(tok.vocab());
  // code: a long document (only its head counts) and a short one; quotes: one document.
  code.tokens = {bos};
  for (int64_t i = 0; i < unigram_head_tokens + 50; ++i) code.tokens.push_back(i < 100 ? 7 : 9);
  code.tokens.insert(code.tokens.end(), {eos, bos, 8, 8, eos});
  quotes.tokens = {bos, 10, 11, 10, eos};
  data::write_token_file(data::token_file_path(dir, "code", "train"), code);
  data::write_token_file(data::token_file_path(dir, "quotes", "train"), quotes);
  const std::vector<ExpertKey> k = make_unigram_keys(dir, {"code", "quotes"}, tok, base);
  ASSERT_EQ(k.size(), 2u);
  const double V = static_cast<double>(tok.n_vocab());
  // code's heads: 100 x token 7 and (unigram_head_tokens - 1 - 100) x token 9, then 8, 8, EOS.
  const double n_code = static_cast<double>(unigram_head_tokens - 1) + 3;
  const double c9 = static_cast<double>(unigram_head_tokens - 1 - 100);
  const auto lp = [&](double c, double n) { return std::log((c + 0.1) / (n + 0.1 * V)); };
  EXPECT_NEAR(k[0].unigram_logp[7], lp(100, n_code), 1e-5);
  EXPECT_NEAR(k[0].unigram_logp[9], lp(c9, n_code), 1e-5);
  EXPECT_NEAR(k[0].unigram_logp[8], lp(2, n_code), 1e-5);
  EXPECT_NEAR(k[0].unigram_logp[static_cast<size_t>(eos)], lp(1, n_code), 1e-5);  // the short one's
  EXPECT_NEAR(k[0].unigram_logp[static_cast<size_t>(bos)], lp(0, n_code), 1e-5);
  EXPECT_NEAR(k[1].unigram_logp[10], lp(2, 4), 1e-5);  // 10, 11, 10, EOS
  EXPECT_NEAR(k[1].unigram_logp[11], lp(1, 4), 1e-5);
  EXPECT_THROW(make_unigram_keys(dir, {"scripture"}, tok, base), Error);  // no token file
}

TEST(Embed, TfIdfByHand) {
  // 3 documents; token 5 in all, token 6 in one: idf(5) = ln(4/4) + 1 = 1, idf(6) = ln(4/2) + 1.
  TfIdfEmbedder e(10, {{5, 6}, {5}, {5, 7}});
  const std::vector<float> v = e.embed(std::vector<int32_t>{5, 6, 6});
  const double i6 = std::log(2.0) + 1;
  const double norm = std::sqrt(1 + 4 * i6 * i6);
  EXPECT_NEAR(v[5], 1 / norm, 1e-6);
  EXPECT_NEAR(v[6], 2 * i6 / norm, 1e-6);
  EXPECT_EQ(v[7], 0.0f);
  EXPECT_THROW(e.embed(std::vector<int32_t>{}), Error);
}

}  // namespace
TEST(RouteEval, ShortDocumentDomainsGetShorterTextsNotFewerItems) {
  using cln::serve::choose_text_length;
  const std::vector<int64_t> long_docs(300, 500);
  std::vector<int64_t> glosses(300, 70);  // wordnet-like: many short documents
  glosses[0] = 400;                       // and one long one
  EXPECT_EQ(choose_text_length(192, 100, {long_docs}), 192);
  EXPECT_EQ(choose_text_length(192, 100, {glosses}), 64);  // 144 and 96 find 1 document
  // Half of the wanted items is enough; just under half is not.
  std::vector<int64_t> some(60, 50);
  some.insert(some.end(), 50, 200);
  EXPECT_EQ(choose_text_length(192, 100, {some}), 192);
  EXPECT_EQ(choose_text_length(192, 102, {some}), 48);
  // A joined text needs half its length from each source; the shorter source decides.
  EXPECT_EQ(choose_text_length(192, 100, {long_docs, std::vector<int64_t>(100, 97)}), 192);
  EXPECT_EQ(choose_text_length(192, 100, {long_docs, std::vector<int64_t>(100, 96)}), 144);
  // No length gives half: the one giving the most items (ties: the longer).
  EXPECT_EQ(choose_text_length(192, 100, {std::vector<int64_t>{500, 500, 100, 100, 100}}), 96);
  EXPECT_EQ(choose_text_length(192, 100, {std::vector<int64_t>{}}), 192);
}

TEST(RouteEval, SegmentsAreRoutedByTheContextBeforeThemTheirOwnTokensOrBothSides) {
  using cln::serve::segment_window_tokens;
  using cln::serve::SegmentRoute;
  const int32_t bos = 1;
  const std::vector<int32_t> t = {1, 10, 11, 12, 13, 14, 15, 16, 17};  // BOS and 8 tokens
  using V = std::vector<int32_t>;
  // The first segment is a prompt: its own tokens, BOS included, either way.
  EXPECT_EQ(segment_window_tokens(t, 0, 3, SegmentRoute::Before, 4, bos), (V{1, 10, 11}));
  EXPECT_EQ(segment_window_tokens(t, 0, 3, SegmentRoute::Own, 4, bos), (V{1, 10, 11}));
  // A stream re-routes on the window before the segment, the text's BOS never twice.
  EXPECT_EQ(segment_window_tokens(t, 6, 9, SegmentRoute::Before, 2, bos), (V{1, 13, 14}));
  EXPECT_EQ(segment_window_tokens(t, 3, 6, SegmentRoute::Before, 8, bos), (V{1, 10, 11}));
  // A prompt's later segment is routed by its own tokens, nothing before it.
  EXPECT_EQ(segment_window_tokens(t, 6, 9, SegmentRoute::Own, 2, bos), (V{1, 15, 16, 17}));
  EXPECT_EQ(segment_window_tokens(t, 8, 9, SegmentRoute::Own, 2, bos), (V{1, 17}));
  EXPECT_THROW(segment_window_tokens(t, 6, 10, SegmentRoute::Own, 2, bos), cln::Error);
  EXPECT_THROW(segment_window_tokens(t, 6, 6, SegmentRoute::Own, 2, bos), cln::Error);
  // Around: the segment and `window` tokens each side, clipped to the text, BOS once.
  EXPECT_EQ(segment_window_tokens(t, 4, 6, SegmentRoute::Around, 2, bos),
            (V{1, 11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(segment_window_tokens(t, 3, 6, SegmentRoute::Around, 0, bos), (V{1, 12, 13, 14}));
  EXPECT_EQ(segment_window_tokens(t, 0, 3, SegmentRoute::Around, 2, bos), (V{1, 10, 11, 12, 13}));
  EXPECT_EQ(segment_window_tokens(t, 2, 4, SegmentRoute::Around, 2, bos),
            (V{1, 10, 11, 12, 13, 14}));
  EXPECT_EQ(segment_window_tokens(t, 6, 9, SegmentRoute::Around, 4, bos),
            (V{1, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_THROW(segment_window_tokens(t, 6, 9, SegmentRoute::Around, -1, bos), cln::Error);
}

TEST(RouteEval, ASegmentsWeightsBlendWithTheRequests) {
  using cln::serve::blend_weights;
  const std::vector<double> seg = {0.0, 1.0, 0.0}, req = {0.6, 0.4, 0.0};
  EXPECT_EQ(blend_weights(seg, req, 1.0), seg);
  EXPECT_EQ(blend_weights(seg, req, 0.0), req);
  const auto half = blend_weights(seg, req, 0.5);
  EXPECT_NEAR(half[0], 0.3, 1e-12);
  EXPECT_NEAR(half[1], 0.7, 1e-12);
  EXPECT_EQ(half[2], 0.0);
  // Gated: where the segment's top expert is the request's, the request's weights stand.
  EXPECT_EQ(blend_weights({0.9, 0.1, 0.0}, req, 0.5, true), req);
  EXPECT_EQ(blend_weights(seg, req, 0.5, true), half);  // they disagree: blended
  // Sure: a segment moves off the request's weights only where its top expert holds at least
  // min_top of its weights, however they scale (scaled to the largest, or none at all).
  const std::vector<double> unsure = {0.5, 0.3, 0.2};
  EXPECT_EQ(blend_weights(unsure, req, 0.5, false, 0.6), req);
  const auto at = blend_weights(unsure, req, 0.5, false, 0.5);  // the share is exactly 0.5
  EXPECT_NEAR(at[0], 0.55, 1e-12);
  EXPECT_NEAR(at[2], 0.10, 1e-12);
  EXPECT_EQ(blend_weights({1.0, 0.6, 0.4}, req, 0.5, false, 0.6), req);  // 1 of 2: a half
  EXPECT_EQ(blend_weights({0.0, 0.0, 0.0}, req, 0.5, false, 0.1), req);  // no expert at all
  EXPECT_EQ(blend_weights(seg, req, 0.5, false, 1.0), half);  // one expert holds everything
  EXPECT_EQ(blend_weights(seg, req, 0.5, true, 0.9), half);   // both gates pass
  EXPECT_THROW(blend_weights(seg, {0.5, 0.5}, 0.5), cln::Error);
  EXPECT_THROW(blend_weights(seg, req, 1.5), cln::Error);
  EXPECT_THROW(blend_weights(seg, req, 0.5, false, -0.1), cln::Error);
  EXPECT_THROW(blend_weights(seg, req, 0.5, false, 1.1), cln::Error);
}

TEST(RouteEval, ASegmentAgreesWhereANeighbourHasItsTopExpert) {
  using cln::serve::agrees_with_a_neighbour;
  const std::vector<double> a = {0.7, 0.3}, b = {0.2, 0.8};
  // a a b a b b: the lone a between the b's and the lone b between the a's do not agree.
  EXPECT_EQ(agrees_with_a_neighbour({a, a, b, a, b, b}),
            (std::vector<bool>{true, true, false, false, true, true}));
  EXPECT_EQ(agrees_with_a_neighbour({a}), std::vector<bool>{false});
  EXPECT_EQ(agrees_with_a_neighbour({a, b}), (std::vector<bool>{false, false}));
  EXPECT_TRUE(agrees_with_a_neighbour({}).empty());
  EXPECT_THROW(agrees_with_a_neighbour({a, {}}), cln::Error);
}

TEST(RouteEval, TwoRoutersAgreeWhereTheirTopExpertsAreTheSame) {
  using cln::serve::same_top_expert;
  // Three experts; the second router's weights are on another scale (only the top counts).
  const std::vector<double> a0 = {0.6, 0.3, 0.1}, a1 = {0.1, 0.2, 0.7}, a2 = {0.3, 0.4, 0.3};
  const std::vector<double> b0 = {5, 1, 1}, b1 = {1, 4, 2}, b2 = {0.2, 0.5, 0.3};
  EXPECT_EQ(same_top_expert({a0, a1, a2}, {b0, b1, b2}), (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(same_top_expert({}, {}).empty());
  EXPECT_THROW(same_top_expert({a0}, {b0, b1}), cln::Error);      // segment counts differ
  EXPECT_THROW(same_top_expert({a0}, {{1.0, 2.0}}), cln::Error);  // expert counts differ
  EXPECT_THROW(same_top_expert({{}}, {{}}), cln::Error);          // no experts
}

TEST(RouteEval, ASegmentIsInTheWholeWhereTheWholeTextLeansToItsTopExpert) {
  using cln::serve::top_expert_in_whole;
  // The whole text leans to experts 0 and 2 (weights on any scale: 0.5 and 0.3 of 10).
  const std::vector<double> whole = {5, 2, 3};
  const std::vector<double> s0 = {0.6, 0.3, 0.1}, s1 = {0.1, 0.7, 0.2}, s2 = {0.2, 0.3, 0.5};
  EXPECT_EQ(top_expert_in_whole({s0, s1, s2}, whole, 0.25), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(top_expert_in_whole({s0, s1, s2}, whole, 0.2), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(top_expert_in_whole({s0, s1, s2}, whole, 0.4), (std::vector<bool>{true, false, false}));
  EXPECT_TRUE(top_expert_in_whole({}, whole, 0.1).empty());
  EXPECT_THROW(top_expert_in_whole({s0}, {1.0, 2.0}, 0.1), cln::Error);  // expert counts differ
  EXPECT_THROW(top_expert_in_whole({s0}, {0.0, 0.0, 0.0}, 0.1), cln::Error);  // no weight
  EXPECT_THROW(top_expert_in_whole({}, {}, 0.1), cln::Error);                 // no experts
}

TEST(RouteEval, TheChosenSettingHasTheSmallestMeanGapToTheRightExpert) {
  using cln::serve::RouteSetResult;
  // A text set (perplexity, lower is better) and a task set (exact match, higher is better).
  RouteSetResult text, task;
  text.text = true, text.right_single = 20.0;
  task.text = false, task.right_single = 98.0;
  EXPECT_NEAR(cln::serve::gap_to_right(text, 21.0), 5.0, 1e-9);   // 5% more perplexity
  EXPECT_DOUBLE_EQ(cln::serve::gap_to_right(task, 90.0), 8.0);    // 8 points fewer
  EXPECT_NEAR(cln::serve::gap_to_right(text, 19.0), -5.0, 1e-9);  // ahead of it
  // Setting 0 is best on text and poor on the task; 1 is close on both; 2 best on the task.
  text.grid = {20.2, 20.6, 22.0};
  task.grid = {20.0, 97.0, 98.0};
  cln::serve::RouteEval e;
  e.sets = {text, task};
  EXPECT_EQ(cln::serve::best_grid_setting(e), 1u);  // mean gaps 39.5, 2, 5
  const std::vector<cln::serve::RouterOptions> grid(3);
  const auto t = cln::serve::grid_table(e, grid);
  ASSERT_EQ(t.rows().size(), 4u);  // three settings and the right expert
  EXPECT_NEAR(std::get<double>(t.rows()[1].back()), 2.0, 1e-9);
}

}  // namespace cln::serve
