// Continuous batching: requests with different expert mixtures in one pass compute what
// each computes alone in a Context (logits within float rounding of a different row count;
// greedy tokens identical), slots join and leave between passes, bad work is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"
#include "clone/engine/batch.h"
#include "clone/engine/context.h"
#include "test_util.h"

using namespace cln;

namespace {

std::shared_ptr<const Model> batch_model() {
  return test::random_model("batch.gguf", 21, 0.25f);
}

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

double rel_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i]))),
    m = std::max(m, static_cast<double>(std::fabs(b[i])));
  return d / std::max(m, 1e-30);
}

}  // namespace

TEST(Batch, MixedRequestsEqualEachRunAlone) {
  const auto m = batch_model();
  const ModelConfig& c = m->config();
  auto l1 = LoraAdapter::load(
      test::random_adapter(c, {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, 4, 8.0f, 1,
                           "b1.gguf"),
      *m);
  auto l2 = LoraAdapter::load(
      test::random_adapter(c, {LayerMatrix::V, LayerMatrix::Up}, 2, 4.0f, 2, "b2.gguf"), *m);
  const std::vector<std::vector<ActiveLora>> mixes = {{}, {{l1, 0.6f}, {l2, -0.4f}}, {{l2, 1.0f}}};
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 5, 77, 200, 13}, {1, 9, 150}, {1, 42, 8, 299, 4, 11, 60}};
  const int steps = 10;

  // Alone: each request in its own context, greedy.
  std::vector<std::vector<std::vector<float>>> alone(3);
  std::vector<std::vector<int32_t>> alone_tokens(3);
  for (size_t r = 0; r < 3; ++r) {
    Context ctx(m, {64, 1, 64});
    ctx.set_loras(mixes[r]);
    auto l = ctx.eval(prompts[r]);
    for (int s = 0; s < steps; ++s) {
      alone[r].emplace_back(l.begin(), l.end());
      const int32_t t = argmax(l);
      alone_tokens[r].push_back(t);
      const int32_t one[1] = {t};
      l = ctx.eval(one);
    }
  }
  // Together: request 2 joins one pass late, so passes mix prefill and decode rows.
  Batch b(m, {4, 64, 64, 1});
  std::vector<int> slot(3, -1);
  std::vector<std::vector<int32_t>> got(3), next(3);
  std::vector<int> events_per_pass;
  int events = 0;
  b.set_hook([&](const LayerEvent& e) {
    ++events;
    EXPECT_LE(e.n_tokens, 64);
  });
  double worst = 0;
  for (int pass = 0; pass <= steps; ++pass) {
    std::vector<Batch::Work> work;
    std::vector<size_t> who;
    for (size_t r = 0; r < 3; ++r) {
      if (r == 2 && pass == 0) continue;  // joins at pass 1
      if (got[r].size() == static_cast<size_t>(steps)) continue;
      if (slot[r] < 0) {
        slot[r] = b.open(mixes[r]);
        ASSERT_GE(slot[r], 0);
        next[r] = prompts[r];
      }
      work.push_back({slot[r], next[r]});
      who.push_back(r);
    }
    if (work.empty()) break;
    events = 0;
    const auto logits = b.step(work);
    EXPECT_EQ(events, static_cast<int>(c.n_layer()) + 1);
    for (size_t i = 0; i < who.size(); ++i) {
      const size_t r = who[i];
      worst = std::max(worst, rel_diff(logits[i], alone[r][got[r].size()]));
      const int32_t t = argmax(logits[i]);
      got[r].push_back(t);
      next[r] = {t};
    }
  }
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(got[r], alone_tokens[r]) << "request " << r;
  EXPECT_LT(worst, 1e-5);
  // The experts mattered: the three requests' first tokens are not all the base's.
  EXPECT_NE(alone[1][0], alone[0][0]);
}

TEST(Batch, SlotsJoinLeaveAndBadWorkIsRefused) {
  const auto m = batch_model();
  Batch b(m, {2, 16, 8, 1});
  const int a = b.open(), c = b.open();
  EXPECT_EQ(b.open(), -1);  // full
  EXPECT_EQ(b.open_slots(), 2);
  const std::vector<int32_t> p = {1, 2, 3};
  b.step({{a, p}, {c, p}});
  EXPECT_EQ(b.n_past(a), 3);
  b.close(a);
  EXPECT_FALSE(b.is_open(a));
  EXPECT_THROW(b.step({{a, p}}), Error);          // closed
  EXPECT_THROW(b.step({{c, p}, {c, p}}), Error);  // twice
  const std::vector<int32_t> many(9, 5);
  EXPECT_THROW(b.step({{c, many}}), Error);  // over the 8-row pass limit
  const int d = b.open();
  EXPECT_EQ(d, a);  // the freed slot is reused, from an empty cache
  EXPECT_EQ(b.n_past(d), 0);
  const std::vector<int32_t> bad = {300};
  EXPECT_THROW(b.step({{d, bad}}), Error);
  const std::vector<int32_t> eight(8, 5);
  b.step({{d, eight}});
  b.step({{d, eight}});
  EXPECT_THROW(b.step({{d, p}}), Error);  // 16 + 3 > the 16-token cache
}

// A slot re-routed mid-stream (set_loras) keeps its cache and computes from then on what a
// Context whose experts change at the same token computes; the other slot is untouched.
TEST(Batch, ReroutedSlotEqualsAContextSwitchingExperts) {
  const auto m = batch_model();
  const ModelConfig& c = m->config();
  auto l1 = LoraAdapter::load(
      test::random_adapter(c, {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, 4, 8.0f, 3,
                           "r1.gguf"),
      *m);
  auto l2 = LoraAdapter::load(
      test::random_adapter(c, {LayerMatrix::Q, LayerMatrix::Down}, 2, 8.0f, 4, "r2.gguf"), *m);
  const std::vector<ActiveLora> before = {{l1, 1.0f}}, after = {{l2, 0.7f}, {l1, 0.3f}};
  const std::vector<int32_t> prompt = {1, 17, 230, 5, 64};
  const int switch_at = 3, steps = 7;
  // Reference: one Context, its experts switched before decode step switch_at; and the same
  // without the switch, to see that the switch changed something.
  const auto run_alone = [&](bool reroute) {
    Context ctx(m, {64, 1, 64});
    ctx.set_loras(before);
    std::vector<std::vector<float>> out;
    auto l = ctx.eval(prompt);
    for (int s = 0; s < steps; ++s) {
      out.emplace_back(l.begin(), l.end());
      if (reroute && s + 1 == switch_at) ctx.set_loras(after);
      const int32_t one[1] = {argmax(l)};
      l = ctx.eval(one);
    }
    return out;
  };
  const auto ref = run_alone(true), kept = run_alone(false);

  Batch b(m, {2, 64, 64, 1});
  const int s = b.open(before), other = b.open();
  std::vector<int32_t> next = prompt, other_next = {1, 9, 150};
  double worst = 0;
  for (int step = 0; step < steps; ++step) {
    const auto logits = b.step({{s, next}, {other, other_next}});
    worst = std::max(worst, rel_diff(logits[0], ref[static_cast<size_t>(step)]));
    if (step + 1 == switch_at) b.set_loras(s, after);
    EXPECT_EQ(b.n_past(s), static_cast<int64_t>(prompt.size()) + step);
    next = {argmax(logits[0])};
    other_next = {argmax(logits[1])};
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(rel_diff(ref.back(), kept.back()), 1e-3);  // the switch mattered
  EXPECT_THROW(b.set_loras(5, after), Error);          // no such slot
}

// Changes of experts scheduled at positions (a prompt's parts): one pass over the whole prompt,
// or chunks that cut across the changes, compute what a Context switching experts at those
// positions computes, and decoding continues under the last change's experts; a Context with
// the changes scheduled computes the same.
TEST(Batch, ExpertsChangedAtPositionsEqualAContextSwitchingThere) {
  const auto m = batch_model();
  const ModelConfig& c = m->config();
  auto l1 = LoraAdapter::load(
      test::random_adapter(c, {kAllLayerMatrices.begin(), kAllLayerMatrices.end()}, 4, 8.0f, 5,
                           "p1.gguf"),
      *m);
  auto l2 = LoraAdapter::load(
      test::random_adapter(c, {LayerMatrix::Q, LayerMatrix::Up}, 2, 8.0f, 6, "p2.gguf"), *m);
  const std::vector<std::vector<ActiveLora>> mix = {
      {{l1, 1.0f}}, {{l2, 0.6f}, {l1, 0.4f}}, {}};  // from 0, from 3, from 7 (the base)
  const std::vector<int64_t> at = {0, 3, 7};
  const std::vector<int32_t> prompt = {1, 17, 230, 5, 64, 9, 81, 120, 33, 4};
  const int steps = 4;
  // Reference: a Context switching experts at 3 and 7.
  Context ctx(m, {64, 1, 64});
  std::vector<float> last;
  for (size_t k = 0; k < at.size(); ++k) {
    ctx.set_loras(mix[k]);
    const auto end = k + 1 < at.size() ? at[k + 1] : static_cast<int64_t>(prompt.size());
    const auto l = ctx.eval(
        std::span(prompt).subspan(static_cast<size_t>(at[k]), static_cast<size_t>(end - at[k])));
    last.assign(l.begin(), l.end());
  }
  std::vector<std::vector<float>> ref = {last};
  for (int s = 1; s < steps; ++s) {
    const int32_t one[1] = {argmax(ref.back())};
    const auto l = ctx.eval(one);
    ref.emplace_back(l.begin(), l.end());
  }
  for (const int64_t chunk : {int64_t{10}, int64_t{4}, int64_t{1}}) {  // one pass, cut, by token
    Batch b(m, {2, 64, 64, 1});
    const int s = b.open(mix[0]), other = b.open({{l2, 1.0f}});
    b.set_loras_from(s, at[1], mix[1]);
    b.set_loras_from(s, at[2], mix[2]);
    std::span<const float> l;
    for (size_t fed = 0; fed < prompt.size(); fed += static_cast<size_t>(chunk)) {
      const auto n = std::min(prompt.size() - fed, static_cast<size_t>(chunk));
      const std::vector<int32_t> other_tok = {static_cast<int32_t>(3 + fed)};
      l = b.step({{other, other_tok}, {s, std::span(prompt).subspan(fed, n)}})[1];
    }
    double worst = rel_diff(l, ref[0]);
    std::vector<int32_t> next = {argmax(l)};
    for (int step = 1; step < steps; ++step) {
      l = b.step({{s, next}})[0];
      worst = std::max(worst, rel_diff(l, ref[static_cast<size_t>(step)]));
      next = {argmax(l)};
    }
    EXPECT_LT(worst, 1e-5) << "chunks of " << chunk;
  }
  // A Context with the same changes scheduled: one eval of the whole prompt (in passes of 10
  // and of 4 rows), then decoding.
  for (const int64_t n_batch : {int64_t{64}, int64_t{4}}) {
    Context sched(m, {64, 1, n_batch});
    sched.set_loras(mix[0]);
    sched.set_loras_from(at[1], mix[1]);
    sched.set_loras_from(at[2], mix[2]);
    auto l = sched.eval(prompt);
    double worst = rel_diff(l, ref[0]);
    for (int step = 1; step < steps; ++step) {
      const int32_t one[1] = {argmax(l)};
      l = sched.eval(one);
      worst = std::max(worst, rel_diff(l, ref[static_cast<size_t>(step)]));
    }
    EXPECT_LT(worst, 1e-5) << "passes of " << n_batch;
    EXPECT_THROW(sched.set_loras_from(5, mix[1]), Error);  // already run
    sched.reset();  // forgets the cache and the schedule, keeps the experts in use (mix[2])
    sched.set_loras_from(1, mix[0]);
    EXPECT_NO_THROW(sched.eval(std::span(prompt).first(3)));
  }
  // Without the changes the logits differ (the changes mattered).
  Batch plain(m, {1, 64, 64, 1});
  const int p0 = plain.open(mix[0]);
  EXPECT_GT(rel_diff(plain.step({{p0, prompt}})[0], ref[0]), 1e-3);
  // A change before the next position, out of order, or past the context is refused; a
  // set_loras drops what was scheduled.
  EXPECT_THROW(plain.set_loras_from(p0, 5, mix[1]), Error);  // 10 positions already run
  plain.set_loras_from(p0, 20, mix[1]);
  EXPECT_THROW(plain.set_loras_from(p0, 20, mix[2]), Error);
  EXPECT_THROW(plain.set_loras_from(p0, 64, mix[2]), Error);
  plain.set_loras(p0, mix[2]);
  EXPECT_NO_THROW(plain.set_loras_from(p0, 12, mix[1]));
}
