// pack_weights: rearranges Q4_0 / Q8_0 rows into the interleaved tiles of packed.h, once.
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

std::unique_ptr<PackedWeights> pack_weights(const Matrix& w, ThreadPool* pool) {
  const int layout = detail::packed_layout_for(w.type);
  if (layout == detail::kNotPacked || w.rows <= 0 || w.cols <= 0) return nullptr;
  const size_t rb = dtype_row_bytes(w.type, w.cols);  // throws on partial blocks
  if (w.data == nullptr) fail("pack_weights: weight data is null");
  const int64_t nb = w.cols / kQK, groups = detail::packed_groups(w.rows);
  const size_t bb = dtype_block_bytes(w.type), tile = detail::packed_tile_bytes(w.type);
  const size_t bytes = static_cast<size_t>(groups * nb) * tile;

  std::unique_ptr<PackedWeights> p(new PackedWeights());
  // Large matrices go on 2 MiB boundaries so the kernel may back them with huge pages:
  // fewer TLB misses while streaming them at memory speed.
  const size_t align = bytes >= (size_t{2} << 20) ? (size_t{2} << 20) : 64;
  p->data_ = static_cast<uint8_t*>(std::aligned_alloc(align, (bytes + align - 1) / align * align));
  if (p->data_ == nullptr) throw std::bad_alloc();
  if (align > 64) madvise(p->data_, (bytes + align - 1) / align * align, MADV_HUGEPAGE);
  p->bytes_ = bytes;
  p->layout_ = layout;

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
