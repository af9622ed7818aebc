// AdamW, the learning-rate schedule and gradient clipping.
#include "clone/train/optim.h"

#include <cmath>

#include "clone/core/error.h"

namespace cln::train {

double Schedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, steps - warmup));
  const double p = std::min(1.0, static_cast<double>(step - warmup) / span);
  const double floor = lr * min_lr_ratio;
  return floor + (lr - floor) * 0.5 * (1.0 + std::cos(3.141592653589793 * p));
}

AdamW::AdamW(std::vector<TensorP> params, AdamWConfig c) : params_(std::move(params)), c_(c) {
  for (const TensorP& p : params_) {
    m_.emplace_back(static_cast<size_t>(p->numel()), 0.0f);
    v_.emplace_back(static_cast<size_t>(p->numel()), 0.0f);
  }
}

double AdamW::step(double lr) {
  double ss = 0;
  for (const TensorP& p : params_) {
    const float* g = p->grad_or_null();
    if (!g) continue;
    double s = 0;
    for (int64_t i = 0; i < p->numel(); ++i) s += double{g[i]} * g[i];
    if (!std::isfinite(s)) fail("the gradient of ", p->name, " holds NaN or Inf");
    ss += s;
  }
  const double norm = std::sqrt(ss);
  const double clip = c_.clip > 0 && norm > c_.clip ? c_.clip / norm : 1.0;
  ++t_;
  const double bc1 = 1.0 - std::pow(c_.beta1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(c_.beta2, static_cast<double>(t_));
  const float b1 = static_cast<float>(c_.beta1), b2 = static_cast<float>(c_.beta2);
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_bc2 = static_cast<float>(1.0 / bc2);
  const float eps = static_cast<float>(c_.eps);
  const float cf = static_cast<float>(clip);
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor& p = *params_[k];
    if (!p.has_grad()) continue;
    const float decay = p.shape.size() >= 2 ? static_cast<float>(lr * c_.weight_decay) : 0.0f;
    float* w = p.data();
    const float* g = p.grad();
    float* m = m_[k].data();
    float* v = v_[k].data();
    for (int64_t i = 0; i < p.numel(); ++i) {
      const float gi = g[i] * cf;
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      w[i] -= decay * w[i];
      w[i] -= step_size * m[i] / (std::sqrt(v[i] * inv_bc2) + eps);
    }
    p.zero_grad();
  }
  return norm;
}

}  // namespace cln::train
