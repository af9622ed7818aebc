#include "clone/prune/surgery.h"

#include <algorithm>
#include <cstring>

#include "clone/core/error.h"
#include "clone/engine/model_writer.h"
#include "clone/engine/schema.h"
#include "clone/kernels/ops.h"

namespace cln::prune {

namespace {

bool arch_key(const std::string& k) {
  return k == "general.architecture" || k == "general.alignment" || k.rfind("llama.", 0) == 0 ||
         k.rfind("deci.", 0) == 0;
}

// The dense tensor as F32, rows x cols (GGUF orientation).
std::vector<float> read_f32(const GgufFile& f, const GgufTensorInfo& t) {
  const int64_t cols = t.ne[0], rows = t.ne.size() > 1 ? t.ne[1] : 1;
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const size_t rb = dtype_row_bytes(t.type, cols);
  for (int64_t r = 0; r < rows; ++r)
    kernels::dequantize_row(t.type, f.tensor_data(t) + static_cast<size_t>(r) * rb,
                            out.data() + static_cast<size_t>(r * cols), cols);
  return out;
}

// F32 data written as `to` (F32 or F16), rows x cols.
void add_matrix(GgufWriter& w, const std::string& name, DType to, const std::vector<float>& x,
                int64_t rows, int64_t cols) {
  const size_t ob = dtype_row_bytes(to, cols);
  std::vector<uint8_t> out(ob * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    kernels::quantize_row(to, x.data() + static_cast<size_t>(r * cols),
                          out.data() + static_cast<size_t>(r) * ob, cols);
  w.add_tensor(name, to, {cols, rows}, out.data(), out.size());
}

DType kept_type(DType t) {
  return t == DType::F32 || t == DType::F16 ? t : DType::F16;
}

// Dense indices of the kept rows (Q, K, V, gate, up) or columns (O, down) of a matrix.
std::vector<int64_t> kept(const ModelConfig& c, const LayerPlan& l, LayerMatrix m) {
  std::vector<int64_t> idx;
  const auto heads = [&](int64_t hd, bool query) {
    for (size_t g = 0; g < l.kv.size(); ++g) {
      if (query) {
        for (int64_t h : l.q[g])
          for (int64_t i = 0; i < hd; ++i) idx.push_back(h * hd + i);
      } else {
        for (int64_t i = 0; i < hd; ++i) idx.push_back(l.kv[g] * hd + i);
      }
    }
  };
  switch (m) {
    case LayerMatrix::Q:
      heads(c.head_dim_k, true);
      break;
    case LayerMatrix::K:
      heads(c.head_dim_k, false);
      break;
    case LayerMatrix::V:
      heads(c.head_dim_v, false);
      break;
    case LayerMatrix::O:
      heads(c.head_dim_v, true);
      break;
    case LayerMatrix::Gate:
    case LayerMatrix::Up:
    case LayerMatrix::Down:
      idx = l.ff;
      break;
  }
  return idx;
}

bool cuts_columns(LayerMatrix m) {
  return m == LayerMatrix::O || m == LayerMatrix::Down;
}

const GgufTensorInfo& need(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) fail(f.path(), ": no tensor '", name, "'");
  return *t;
}

void copy_tensor(GgufWriter& w, const GgufFile& f, const GgufTensorInfo& t) {
  w.add_tensor(t.name, t.type, t.ne, f.tensor_data(t), t.nbytes);
}

}  // namespace

void write_pruned(const GgufFile& dense, const PrunePlan& plan, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& notes) {
  const ModelConfig dc = ModelConfig::from_gguf(dense);
  const ModelConfig pc = plan.shape(dc);  // validates
  GgufWriter w;
  bool converted = false;
  for (const auto& [k, v] : dense.metadata())
    if (!arch_key(k) && k != "general.file_type") w.set(k, v);
  write_config_metadata(pc, w);
  w.set("clone.pruning.plan", GgufValue::str(plan.to_json()));
  for (const auto& [k, v] : notes) w.set(k, GgufValue::str(v));
  for (const TensorSpec& s : model_tensors(pc)) {
    const GgufTensorInfo& t = need(dense, s.name);
    if (s.role != TensorRole::Matrix) {
      copy_tensor(w, dense, t);
      continue;
    }
    const std::vector<float> x = read_f32(dense, t);
    const int64_t rows = t.ne[1], cols = t.ne[0];
    const std::vector<int64_t> idx = kept(dc, plan.layers[static_cast<size_t>(s.layer)], s.matrix);
    std::vector<float> y(static_cast<size_t>(s.rows * s.cols));
    if (cuts_columns(s.matrix)) {
      if (static_cast<int64_t>(idx.size()) != s.cols || rows != s.rows)
        fail("pruning: ", s.name, ": kept columns do not match the pruned shape");
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < s.cols; ++j)
          y[static_cast<size_t>(r * s.cols + j)] =
              x[static_cast<size_t>(r * cols + idx[static_cast<size_t>(j)])];
    } else {
      if (static_cast<int64_t>(idx.size()) != s.rows || cols != s.cols)
        fail("pruning: ", s.name, ": kept rows do not match the pruned shape");
      for (int64_t r = 0; r < s.rows; ++r)
        std::memcpy(y.data() + static_cast<size_t>(r * cols),
                    x.data() + static_cast<size_t>(idx[static_cast<size_t>(r)] * cols),
                    static_cast<size_t>(cols) * sizeof(float));
    }
    const DType to = kept_type(t.type);
    converted |= to != t.type;
    add_matrix(w, s.name, to, y, s.rows, s.cols);
  }
  if (!converted && dense.find("general.file_type"))
    w.set("general.file_type", *dense.find("general.file_type"));
  w.write(path);
}

void write_masked(const GgufFile& dense, const PrunePlan& plan, const std::string& path) {
  const ModelConfig dc = ModelConfig::from_gguf(dense);
  plan.validate(dc);
  GgufWriter w;
  for (const auto& [k, v] : dense.metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const TensorSpec& s : model_tensors(dc)) {
    const GgufTensorInfo& t = need(dense, s.name);
    if (s.role != TensorRole::Matrix || !cuts_columns(s.matrix)) {
      copy_tensor(w, dense, t);
      continue;
    }
    std::vector<float> x = read_f32(dense, t);
    const std::vector<int64_t> idx = kept(dc, plan.layers[static_cast<size_t>(s.layer)], s.matrix);
    std::vector<char> keep(static_cast<size_t>(s.cols), 0);
    for (int64_t j : idx) keep[static_cast<size_t>(j)] = 1;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t j = 0; j < s.cols; ++j)
        if (!keep[static_cast<size_t>(j)]) x[static_cast<size_t>(r * s.cols + j)] = 0.0f;
    add_matrix(w, s.name, kept_type(t.type), x, s.rows, s.cols);
  }
  w.write(path);
}

}  // namespace cln::prune
