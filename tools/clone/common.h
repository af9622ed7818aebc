// Pieces several subcommands share: LoRA specs, token-id files.
#pragma once

#include <string>
#include <vector>

#include "clone/engine/lora.h"
#include "clone/engine/model.h"

namespace cln::cli {

// "path" or "path:weight" (weight defaults to 1).
std::vector<ActiveLora> load_loras(const std::vector<std::string>& specs, const Model& model);

// Token ids as a JSON-style list "[1, 2, 3]" or whitespace/comma separated numbers.
std::vector<int32_t> read_ids_file(const std::string& path);

std::string read_text_file(const std::string& path);

}  // namespace cln::cli
