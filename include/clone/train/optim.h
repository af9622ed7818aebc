// AdamW with decoupled weight decay, linear warm-up then cosine decay, and clipping of
// the global gradient norm. Optimizer state is plain vectors so checkpoints can hold it.
#pragma once

#include <cstdint>
#include <vector>

#include "clone/train/autograd.h"

namespace cln::train {

struct Schedule {
  double lr = 1e-3;               // peak
  int64_t warmup = 100;           // steps of linear warm-up from lr / warmup
  int64_t steps = 1000;           // total; cosine decay from the end of warm-up to here
  double min_lr_ratio = 0.1;      // the floor, as a fraction of lr
  double at(int64_t step) const;  // step counts from 0
};

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // applied to tensors of 2 or more dimensions only
  double clip = 1.0;          // max global gradient norm; 0 = no clipping
};

class AdamW {
 public:
  AdamW(std::vector<TensorP> params, AdamWConfig c);
  // Clips (when configured), updates every parameter with a gradient, zeroes the
  // gradients. Returns the global gradient norm before clipping. Throws cln::Error if a
  // gradient holds NaN or Inf, before touching any weight.
  double step(double lr);
  int64_t t() const { return t_; }

  // State, for checkpoints: m and v per parameter, in params order.
  std::vector<std::vector<float>>& m() { return m_; }
  std::vector<std::vector<float>>& v() { return v_; }
  void set_t(int64_t t) { t_ = t; }
  const std::vector<TensorP>& params() const { return params_; }

 private:
  std::vector<TensorP> params_;
  AdamWConfig c_;
  std::vector<std::vector<float>> m_, v_;
  int64_t t_ = 0;
};

}  // namespace cln::train
