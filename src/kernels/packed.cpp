// pack_weights: rearranges Q4_0 / Q8_0 rows into the interleaved tiles of packed.h, and F32 /
// F16 rows into its column panels, once.
#include "kernels/packed.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "clone/core/error.h"

namespace cln::kernels {

PackedWeights::~PackedWeights() {
  std::free(data_);
}

namespace {

// Bytes on 64-byte boundaries; large matrices on 2 MiB ones so the kernel may back them
// with huge pages: fewer TLB misses while streaming them at memory speed.
uint8_t* allocate(size_t bytes) {
  const size_t align = bytes >= (size_t{2} << 20) ? (size_t{2} << 20) : 64;
  const size_t padded = (bytes + align - 1) / align * align;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, padded));
  if (p == nullptr) throw std::bad_alloc();
  if (align > 64) madvise(p, padded, MADV_HUGEPAGE);
  return p;
}

// Panels of 64 rows stored column by column (packed.h), in the matrix's own element type.
template <typename T>
void pack_panels(const Matrix& w, T* dst, ThreadPool* pool) {
  const auto* src = static_cast<const T*>(w.data);
  const int64_t K = w.cols, R = detail::kPanelRows;
  const auto pack = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* panel = dst + p * K * R;
      // 64 rows at a time, in K slices that keep the 64 source rows' lines in L1.
      for (int64_t k0 = 0; k0 < K; k0 += 64) {
        const int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
        for (int64_t r = 0; r < R; ++r) {
          const int64_t row = p * R + r;
          for (int64_t k = k0; k < k1; ++k)
            panel[k * R + r] = row < w.rows ? src[row * K + k] : T{0};
        }
      }
    }
  };
  const int64_t panels = detail::packed_groups(w.rows, R);
  if (pool == nullptr) {
    pack(0, panels);
  } else {
    pool->parallel_for(panels, 1, pack);
  }
}

}  // namespace

std::unique_ptr<PackedWeights> pack_weights(const Matrix& w, ThreadPool* pool) {
  return detail::pack_weights_as(w, detail::packed_layout_for(w.type), pool);
}

std::unique_ptr<PackedWeights> detail::pack_weights_as(const Matrix& w, int layout,
                                                       ThreadPool* pool) {
  if (layout == detail::kNotPacked || w.rows <= 0 || w.cols <= 0) return nullptr;
  if (detail::packed_layout_type(layout) != w.type)
    fail("pack_weights: layout ", layout, " does not hold ", dtype_name(w.type), " weights");
  const size_t rb = dtype_row_bytes(w.type, w.cols);  // throws on partial blocks
  if (w.data == nullptr) fail("pack_weights: weight data is null");
  std::unique_ptr<PackedWeights> p(new PackedWeights());
  p->layout_ = layout;
  if (detail::is_panel_layout(layout)) {
    const size_t elem = w.type == DType::F32 ? sizeof(float) : sizeof(uint16_t);
    p->bytes_ = static_cast<size_t>(detail::packed_groups(w.rows, detail::kPanelRows) *
                                    detail::kPanelRows * w.cols) *
                elem;
    p->data_ = allocate(p->bytes_);
    if (w.type == DType::F32) {
      pack_panels(w, reinterpret_cast<float*>(p->data_), pool);
    } else {
      pack_panels(w, reinterpret_cast<uint16_t*>(p->data_), pool);
    }
    return p;
  }
  const int64_t nb = w.cols / kQK, groups = detail::packed_groups(w.rows);
  const size_t bb = dtype_block_bytes(w.type), tile = detail::packed_tile_bytes(w.type);
  const size_t bytes = static_cast<size_t>(groups * nb) * tile;
  p->data_ = allocate(bytes);
  p->bytes_ = bytes;

  const int quant_bytes = static_cast<int>(bb) - 2;  // 16 (Q4_0) or 32 (Q8_0)
  const auto* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = p->data_;
  const auto pack_groups = [&](int64_t g0, int64_t g1) {
    std::memset(dst + static_cast<size_t>(g0 * nb) * tile, 0,
                static_cast<size_t>((g1 - g0) * nb) * tile);
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* t = dst + static_cast<size_t>(g * nb + b) * tile;
        for (int r = 0; r < detail::kPackRows; ++r) {
          const int64_t row = g * detail::kPackRows + r;
          if (row >= w.rows) break;
          const uint8_t* blk = src + static_cast<size_t>(row) * rb + static_cast<size_t>(b) * bb;
          std::memcpy(t + 2 * r, blk, 2);  // fp16 scale
          for (int c = 0; c < quant_bytes / 4; ++c)
            std::memcpy(t + 32 + 64 * c + 4 * r, blk + 2 + 4 * c, 4);
        }
      }
    }
  };
  if (pool == nullptr) {
    pack_groups(0, groups);
  } else {
    pool->parallel_for(groups, 1, pack_groups);
  }
  return p;
}

}  // namespace cln::kernels
