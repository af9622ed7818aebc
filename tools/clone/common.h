// Pieces several subcommands share: LoRA specs, token-id files, the folders of run-time
// data.
#pragma once

#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "clone/core/resources.h"

#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/serve/router.h"

namespace cln::cli {

// "path" or "path:weight" (weight defaults to 1).
std::vector<ActiveLora> load_loras(const std::vector<std::string>& specs, const Model& model);

// Named experts from "path" (named by the file's stem) or "name=path" specs; throws
// cln::Error for an empty name or path or a name given twice.
std::vector<std::pair<std::string, std::string>> expert_specs(
    const std::vector<std::string>& specs);

// The --expert adapters loaded against `model`, each with its router key where it has one.
struct Experts {
  std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> adapters;
  std::vector<serve::ExpertKey> keys;  // empty when none has a key
};
// Loads expert_specs(specs); either every adapter has a router key or none does (else
// cln::Error naming the fix); `need_keys` makes none an error too.
Experts load_experts(const std::vector<std::string>& specs, const Model& model, bool need_keys);

// Token ids as a JSON-style list "[1, 2, 3]" or whitespace/comma separated numbers.
std::vector<int32_t> read_ids_file(const std::string& path);

std::string read_text_file(const std::string& path);
// A model's shape from a preset name (engine/presets.h) or a .gguf file's metadata (a pruned
// or trained model: per-layer shapes and all).
ModelConfig model_shape(const std::string& preset_or_gguf);
// Writes text to path (a report); throws cln::Error naming the path if it cannot.
void write_text_file(const std::string& path, const std::string& text);

// --profiles-dir / --models-dir / --shared-dir on `app` for the kinds of data it reads
// (core/resources.h: a flag wins over $CLONE_PROFILES etc. and over share/clone/).
void add_resource_flags(CLI::App& app, std::initializer_list<Resource> kinds);

}  // namespace cln::cli
