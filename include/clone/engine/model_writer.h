// Writing models: the metadata a config implies (llama.* when every layer is alike,
// deci.* with per-layer arrays otherwise, which llama.cpp also loads), models with
// seeded random weights for tests and benchmarks, and quantization of a whole file.
#pragma once

#include <cstdint>
#include <string>

#include "clone/engine/model_config.h"
#include "clone/gguf/gguf.h"

namespace cln {

// Sets general.architecture and the <arch>.* keys for c. Chooses "deci" unless
// c.uniform(); c.arch is ignored.
void write_config_metadata(const ModelConfig& c, GgufWriter& w);

struct RandomInit {
  uint64_t seed = 1;
  DType type = DType::F32;  // type of the 2-D weight matrices; norms are always F32
  float std = 0.02f;        // weights ~ uniform with this standard deviation
};

// Writes a model of shape c with random weights. The vocabulary (tokenizer.* keys) is
// copied from vocab_source when given; otherwise a byte-fallback vocabulary of
// c.n_vocab tokens is made (<unk>, <s>, </s>, 256 byte tokens, then filler pieces).
void init_model(const ModelConfig& c, const RandomInit& init, const GgufFile* vocab_source,
                const std::string& path);

// Rewrites a model with its 2-D weight matrices in `type` (quantized targets need F32/F16
// sources; F32/F16 targets dequantize anything);
// norms stay F32. A matrix whose rows are not whole blocks of `type` (pruned widths)
// is written as F16 instead; returns how many fell back so.
int quantize_model(const GgufFile& in, DType type, const std::string& path);

}  // namespace cln
