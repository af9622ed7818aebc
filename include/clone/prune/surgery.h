// Cutting a model to a plan (plan.h): the kept rows and columns of every layer matrix,
// written as an ordinary GGUF (deci.* per-layer keys unless every layer is alike) with the
// dense model's tokenizer and metadata, and "clone.pruning.plan" saying what was kept.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "clone/gguf/gguf.h"
#include "clone/prune/plan.h"

namespace cln::prune {

// The pruned model. F32 and F16 matrices keep their type; quantized ones are written as
// F16 (their kept widths need not be whole blocks; re-quantize with `clone quantize`).
// `notes` are extra string keys (e.g. "clone.pruning.method").
void write_pruned(const GgufFile& dense, const PrunePlan& plan, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& notes = {});

// The dense model with every removed unit's output zeroed instead (an O column block per
// removed query head, a down column per removed channel): what the pruned model computes,
// at the dense shape. The tests compare the two; importance by masking uses it too.
void write_masked(const GgufFile& dense, const PrunePlan& plan, const std::string& path);

}  // namespace cln::prune
