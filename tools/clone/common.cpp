#include "common.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/engine/presets.h"
#include "clone/gguf/gguf.h"

namespace cln::cli {

std::vector<ActiveLora> load_loras(const std::vector<std::string>& specs, const Model& model) {
  std::vector<ActiveLora> out;
  for (const auto& spec : specs) {
    std::string path = spec;
    float w = 1.0f;
    const auto colon = spec.rfind(':');
    if (colon != std::string::npos && colon + 1 < spec.size()) {
      const std::string tail = spec.substr(colon + 1);
      char* end = nullptr;
      const float v = std::strtof(tail.c_str(), &end);
      if (end && *end == '\0') {
        path = spec.substr(0, colon);
        w = v;
      }
    }
    out.push_back({LoraAdapter::load(path, model), w});
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> expert_specs(
    const std::vector<std::string>& specs) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& a : specs) {
    const auto eq = a.find('=');
    const std::string path = eq == std::string::npos ? a : a.substr(eq + 1);
    const std::string name =
        eq == std::string::npos ? std::filesystem::path(a).stem().string() : a.substr(0, eq);
    if (name.empty() || path.empty()) fail("--expert ", a, ": expected path or name=path");
    for (const auto& e : out)
      if (e.first == name) fail("two experts are named '", name, "': name them with name=path");
    out.emplace_back(name, path);
  }
  return out;
}

Experts load_experts(const std::vector<std::string>& specs, const Model& model, bool need_keys) {
  Experts e;
  std::string without;  // the first adapter without a key
  for (const auto& [name, path] : expert_specs(specs)) {
    e.adapters.emplace_back(name, LoraAdapter::load(path, model));
    auto key = serve::read_key(*GgufFile::open(path));
    if (key)
      e.keys.push_back(std::move(*key));
    else if (without.empty())
      without = path;
  }
  if (!without.empty() && (need_keys || !e.keys.empty()))
    fail("expert ", without, " has no router key: add one with `clone lora keys`",
         need_keys ? ", or apply it with --lora" : " (some experts have keys and some do not)");
  return e;
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) fail("cannot write ", path);
}

ModelConfig model_shape(const std::string& preset_or_gguf) {
  if (preset_or_gguf.ends_with(".gguf"))
    return ModelConfig::from_gguf(*GgufFile::open(preset_or_gguf));
  return model_preset(preset_or_gguf);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> read_ids_file(const std::string& path) {
  const std::string s = read_text_file(path);
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      long long v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        v = v * 10 + (s[i] - '0');
        if (v > 0x7fffffff) fail(path, ": token id too large at byte ", i);
        ++i;
      }
      ids.push_back(static_cast<int32_t>(v));
    } else if (c == '[' || c == ']' || c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else {
      fail(path, ": unexpected character '", c, "' at byte ", i, " in a token id list");
    }
  }
  return ids;
}

void add_resource_flags(CLI::App& app, std::initializer_list<Resource> kinds) {
  for (const Resource kind : kinds) {
    const std::string flag = std::string("--") + resource_name(kind) + "-dir";
    const char* what = kind == Resource::Profiles ? "device profiles"
                       : kind == Resource::Models
                           ? "shipped models (learned DVFS policies in dvfs/)"
                           : "shared data (Azure traces in data/)";
    app.add_option_function<std::string>(
           flag, [kind, flag](const std::string& dir) { set_resource_dir(kind, dir, flag); },
           std::string("folder of the ") + what + " (default: $" + resource_env(kind) +
               ", else share/clone/" + resource_name(kind) + " beside the binary)")
        ->check(CLI::ExistingDirectory);
  }
}

}  // namespace cln::cli
