#include "clone/prune/importance.h"

#include <cmath>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/kernels/thread_pool.h"

namespace cln::prune {

Method method_from_name(const std::string& name) {
  if (name == "magnitude") return Method::Magnitude;
  if (name == "wanda") return Method::Wanda;
  if (name == "taylor") return Method::Taylor;
  if (name == "block") return Method::Block;
  if (name == "random") return Method::Random;
  fail("unknown importance method '", name, "' (magnitude, wanda, taylor, block, random)");
}

std::string method_name(Method m) {
  switch (m) {
    case Method::Magnitude:
      return "magnitude";
    case Method::Wanda:
      return "wanda";
    case Method::Taylor:
      return "taylor";
    case Method::Block:
      return "block";
    case Method::Random:
      return "random";
  }
  return "?";
}

Calibration calibration_from_data(const std::string& data_dir, const Vocab& vocab, int64_t n_seq,
                                  int64_t seq_len, uint64_t seed, const std::string& split) {
  Calibration cal;
  cal.n_seq = n_seq, cal.seq_len = seq_len;
  std::vector<std::vector<uint16_t>> streams;
  for (const std::string& d : data::domain_names()) {
    const std::string path = data::token_file_path(data_dir, d, split);
    streams.push_back(data::read_token_file(path, vocab, "the model").tokens);
    if (static_cast<int64_t>(streams.back().size()) < seq_len + 2)
      fail(path, ": ", streams.back().size(), " tokens, fewer than one calibration window");
  }
  Rng rng(seed);
  for (int64_t s = 0; s < n_seq; ++s) {
    const auto& t = streams[static_cast<size_t>(s) % streams.size()];
    const auto room = static_cast<double>(t.size() - static_cast<size_t>(seq_len) - 1);
    const auto start = static_cast<size_t>(rng.uniform() * room);
    for (int64_t i = 0; i <= seq_len; ++i) cal.tokens.push_back(t[start + static_cast<size_t>(i)]);
  }
  return cal;
}

namespace {

// What the calibration pass gathers.
struct Stats {
  // [layer][matrix][input feature]: sum over tokens of the input squared
  std::vector<std::array<std::vector<double>, kLayerMatrices>> in_sq;
  std::vector<double> cos_attn, cos_ffn;  // [layer] sums of cosines
  double tokens = 0;
};

Stats calibrate(Method m, train::LlamaModel& model, const Calibration& cal) {
  const ModelConfig& c = model.config();
  Stats st;
  st.in_sq.resize(static_cast<size_t>(c.n_layer()));
  st.cos_attn.assign(static_cast<size_t>(c.n_layer()), 0.0);
  st.cos_ffn.assign(static_cast<size_t>(c.n_layer()), 0.0);
  if (cal.n_seq <= 0 || cal.seq_len <= 0 || cal.batch <= 0)
    fail("importance: ", method_name(m), " needs calibration text (sequences, length, batch)");
  const int64_t stride = cal.seq_len + 1;
  if (static_cast<int64_t>(cal.tokens.size()) != cal.n_seq * stride)
    fail("importance: ", cal.tokens.size(), " calibration tokens for ", cal.n_seq, " sequences of ",
         cal.seq_len, " + 1");
  train::ForwardProbe probe;
  if (m == Method::Wanda)
    probe.matrix_input = [&](int32_t il, LayerMatrix w, const train::TensorP& x) {
      std::vector<double>& acc = st.in_sq[static_cast<size_t>(il)][static_cast<size_t>(index(w))];
      const int64_t cols = x->cols(), rows = x->numel() / cols;
      acc.resize(static_cast<size_t>(cols), 0.0);
      const float* p = x->data();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) {
          const double v = p[r * cols + j];
          acc[static_cast<size_t>(j)] += v * v;
        }
    };
  if (m == Method::Block)
    probe.half = [&](int32_t il, bool attn, const train::TensorP& a, const train::TensorP& b) {
      const int64_t cols = a->cols(), rows = a->numel() / cols;
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t j = 0; j < cols; ++j) {
          const double x = a->data()[r * cols + j], y = b->data()[r * cols + j];
          ab += x * y, aa += x * x, bb += y * y;
        }
        sum += ab / std::sqrt(std::max(aa * bb, 1e-30));
      }
      (attn ? st.cos_attn : st.cos_ffn)[static_cast<size_t>(il)] += sum;
    };
  kernels::ThreadPool pool(cal.threads);
  if (m == Method::Taylor) model.set_trainable(true);
  for (const train::TensorP& p : model.params())
    if (p->has_grad()) p->zero_grad();
  for (int64_t s0 = 0; s0 < cal.n_seq; s0 += cal.batch) {
    const int64_t ns = std::min(cal.batch, cal.n_seq - s0);
    std::vector<int32_t> tok, tgt;
    for (int64_t s = s0; s < s0 + ns; ++s)
      for (int64_t i = 0; i < cal.seq_len; ++i) {
        tok.push_back(cal.tokens[static_cast<size_t>(s * stride + i)]);
        tgt.push_back(cal.tokens[static_cast<size_t>(s * stride + i + 1)]);
      }
    train::Graph g(&pool);
    train::TensorP logits = model.forward(g, tok, ns, cal.seq_len, &probe);
    if (m == Method::Taylor) {
      // The summed (not mean) loss, so batches add up to the whole set's gradient.
      train::TensorP loss = train::op::scale(g, train::op::cross_entropy(g, logits, tgt),
                                             static_cast<float>(tok.size()));
      g.backward(loss);
    }
    st.tokens += static_cast<double>(tok.size());
  }
  return st;
}

}  // namespace

Scores score(Method m, train::LlamaModel& model, const Calibration& cal, uint64_t seed) {
  const ModelConfig& c = model.config();
  const auto nl = static_cast<size_t>(c.n_layer());
  Scores out;
  out.method = m;
  out.attn.assign(nl, 0.0), out.ffn.assign(nl, 0.0);
  if (m == Method::Random) {
    Rng rng(seed);
    for (size_t il = 0; il < nl; ++il) {
      const LayerShape& s = c.layers[il];
      std::vector<double> h, kv, ff;
      for (int64_t i = 0; i < s.n_head; ++i) h.push_back(rng.uniform());
      for (int64_t i = 0; i < s.n_head_kv; ++i) kv.push_back(rng.uniform());
      for (int64_t i = 0; i < s.n_ff; ++i) ff.push_back(rng.uniform());
      out.head.push_back(h), out.kv.push_back(kv), out.ff.push_back(ff);
      out.attn[il] = s.has_attention() ? rng.uniform() : 0.0;
      out.ffn[il] = s.has_ffn() ? rng.uniform() : 0.0;
    }
    return out;
  }
  const bool was_trainable = !model.params().empty() && model.params().front()->requires_grad;
  Stats st;
  if (m != Method::Magnitude) st = calibrate(m, model, cal);
  if (m == Method::Block) {
    for (size_t il = 0; il < nl; ++il) {
      if (c.layers[il].has_attention()) out.attn[il] = 1.0 - st.cos_attn[il] / st.tokens;
      if (c.layers[il].has_ffn()) out.ffn[il] = 1.0 - st.cos_ffn[il] / st.tokens;
    }
    return out;
  }
  // Signed per-element contributions; a group's score is |sum| (all terms are >= 0 but
  // Taylor's).
  for (size_t il = 0; il < nl; ++il) {
    const LayerShape& s = c.layers[il];
    std::array<std::vector<double>, kLayerMatrices> row_sum, col_sum;  // per matrix
    double half_sum[2] = {0, 0};
    for (LayerMatrix lm : kAllLayerMatrices) {
      if (!has_matrix(c, static_cast<int64_t>(il), lm)) continue;
      const train::TensorP w = model.find(layer_tensor_name(static_cast<int64_t>(il), lm));
      const int64_t cols = w->cols(), rows = w->numel() / cols;
      const float* wp = w->data();
      const float* gp = w->grad_or_null();
      if (m == Method::Taylor && !gp) fail("importance: no gradient reached ", w->name);
      const std::vector<double>* in =
          m == Method::Wanda ? &st.in_sq[il][static_cast<size_t>(index(lm))] : nullptr;
      if (in && static_cast<int64_t>(in->size()) != cols)
        fail("importance: no calibration input reached ", w->name);
      std::vector<double>& rs = row_sum[static_cast<size_t>(index(lm))];
      std::vector<double>& cs = col_sum[static_cast<size_t>(index(lm))];
      rs.assign(static_cast<size_t>(rows), 0.0), cs.assign(static_cast<size_t>(cols), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) {
          const double x = wp[r * cols + j];
          double v = 0;
          if (m == Method::Magnitude) v = x * x;
          if (m == Method::Wanda) v = std::fabs(x) * std::sqrt((*in)[static_cast<size_t>(j)]);
          if (m == Method::Taylor) v = static_cast<double>(gp[r * cols + j]) * x;
          rs[static_cast<size_t>(r)] += v, cs[static_cast<size_t>(j)] += v;
          half_sum[in_attention(lm) ? 0 : 1] += v;
        }
    }
    const auto block = [](const std::vector<double>& v, int64_t first, int64_t n) {
      double t = 0;
      for (int64_t i = first; i < first + n; ++i) t += v[static_cast<size_t>(i)];
      return t;
    };
    const auto& R = row_sum;
    const auto& C = col_sum;
    const auto at = [](LayerMatrix lm) { return static_cast<size_t>(index(lm)); };
    std::vector<double> head(static_cast<size_t>(s.n_head)), kv(static_cast<size_t>(s.n_head_kv));
    std::vector<double> ff(static_cast<size_t>(s.n_ff));
    if (s.has_attention()) {
      const int64_t dk = c.head_dim_k, dv = c.head_dim_v, per = s.n_head / s.n_head_kv;
      std::vector<double> head_signed(static_cast<size_t>(s.n_head));
      for (int64_t h = 0; h < s.n_head; ++h)
        head_signed[static_cast<size_t>(h)] =
            block(R[at(LayerMatrix::Q)], h * dk, dk) + block(C[at(LayerMatrix::O)], h * dv, dv);
      for (int64_t g = 0; g < s.n_head_kv; ++g) {
        double t =
            block(R[at(LayerMatrix::K)], g * dk, dk) + block(R[at(LayerMatrix::V)], g * dv, dv);
        for (int64_t h = g * per; h < (g + 1) * per; ++h) t += head_signed[static_cast<size_t>(h)];
        kv[static_cast<size_t>(g)] = std::fabs(t);
      }
      for (int64_t h = 0; h < s.n_head; ++h)
        head[static_cast<size_t>(h)] = std::fabs(head_signed[static_cast<size_t>(h)]);
      out.attn[il] = std::fabs(half_sum[0]);
    }
    if (s.has_ffn()) {
      for (int64_t f = 0; f < s.n_ff; ++f)
        ff[static_cast<size_t>(f)] = std::fabs(R[at(LayerMatrix::Gate)][static_cast<size_t>(f)] +
                                               R[at(LayerMatrix::Up)][static_cast<size_t>(f)] +
                                               C[at(LayerMatrix::Down)][static_cast<size_t>(f)]);
      out.ffn[il] = std::fabs(half_sum[1]);
    }
    out.head.push_back(std::move(head)), out.kv.push_back(std::move(kv));
    out.ff.push_back(std::move(ff));
  }
  if (m == Method::Taylor) {
    for (const train::TensorP& p : model.params()) p->free_grad();
    model.set_trainable(was_trainable);
  }
  return out;
}

}  // namespace cln::prune
