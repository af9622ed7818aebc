// Shapes of well-known models by name: what `clone init-model --preset`, `clone sim --model`,
// `clone dvfs train` and the cost model's tests mean by "gemma-2b" or "tinyllama-1.1b".
#pragma once

#include <string>
#include <vector>

#include "clone/engine/model_config.h"

namespace cln {

// "gemma-2b" (the paper's measurement model, tied output, FP16), "llama2-7b",
// "tinyllama-1.1b" (also "tinyllama"), "base" (the ~7M shape of the llama.cpp comparison
// files). Weights F16 for the published models, F32 for "base". Throws cln::Error naming
// the presets for any other name.
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace cln
