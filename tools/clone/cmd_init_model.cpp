// clone init-model: a model of any shape (per-layer shapes included) with seeded random
// weights, for tests and benchmarks.
#include <cstdio>
#include <memory>
#include <sstream>

#include "clone/core/error.h"
#include "clone/engine/model_writer.h"
#include "clone/engine/presets.h"
#include "subcommand.h"

namespace cmd_init_model {

struct Opts {
  std::string out, preset, type = "f32", vocab_from, name;
  int64_t layers = 4, embd = 128, vocab = 1024, ctx = 2048, head_dim = 0;
  std::string heads = "4", kv_heads = "", ff = "256";
  float rope_base = 10000.0f, eps = 1e-5f, std = 0.02f;
  uint64_t seed = 1;
  bool tied = false;
  bool vocab_set = false;  // --vocab given
};

std::vector<int64_t> per_layer(const std::string& s, int64_t n, const char* what) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      cln::fail("--", what, ": '", item, "' is not an integer");
    }
  }
  if (v.size() == 1) v.assign(static_cast<size_t>(n), v[0]);
  if (static_cast<int64_t>(v.size()) != n)
    cln::fail("--", what, " has ", v.size(), " values for ", n, " layers");
  return v;
}

int run(Opts o) {
  using namespace cln;
  const auto type = dtype_from_name(o.type);
  if (!type) fail("unknown --type '", o.type, "' (f32, f16, q8_0, q4_0)");
  ModelConfig c;
  if (!o.preset.empty()) {  // the shape (and context, RoPE, norm epsilon) from engine/presets.h
    c = model_preset(o.preset);
    o.layers = c.n_layer();
  } else {
    c.n_vocab = o.vocab;
    c.n_embd = o.embd;
    c.n_ctx_train = o.ctx;
    c.rope_base = o.rope_base;
    c.rms_eps = o.eps;
    c.tied_output = o.tied;
    const auto h = per_layer(o.heads, o.layers, "heads");
    const auto kv = per_layer(o.kv_heads.empty() ? o.heads : o.kv_heads, o.layers, "kv-heads");
    const auto ff = per_layer(o.ff, o.layers, "ff");
    int64_t h0 = 0;
    for (int64_t x : h) h0 = h0 ? h0 : x;
    c.head_dim_k = c.head_dim_v = o.head_dim > 0 ? o.head_dim : (h0 > 0 ? o.embd / h0 : 0);
    for (int64_t i = 0; i < o.layers; ++i)
      c.layers.push_back(
          {h[static_cast<size_t>(i)], kv[static_cast<size_t>(i)], ff[static_cast<size_t>(i)]});
  }
  c.name = o.name.empty() ? "clone-random" : o.name;
  c.weight_type = *type;
  std::shared_ptr<GgufFile> vocab;
  if (!o.vocab_from.empty()) {  // the tokenizer and its size come from the file
    vocab = GgufFile::open(o.vocab_from);
    if (!vocab->has("tokenizer.ggml.tokens"))
      fail(o.vocab_from, ": no tokenizer (tokenizer.ggml.tokens) to copy");
    if (o.vocab_set)
      fail("give --vocab or --vocab-from, not both (the vocabulary size comes from the file)");
    c.n_vocab = static_cast<int64_t>(vocab->find("tokenizer.ggml.tokens")->array_size());
  }
  init_model(c, {o.seed, *type, o.std}, vocab.get(), o.out);
  std::printf("wrote %s: %s, %lld layers, %.2fM parameters, %s\n", o.out.c_str(),
              c.uniform() ? "llama" : "deci (per-layer shapes)", static_cast<long long>(o.layers),
              static_cast<double>(c.n_params()) / 1e6, std::string(dtype_name(*type)).c_str());
  return 0;
}

const cln::cli::Register reg{
    "init-model", "Write a model of any shape with seeded random weights", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-o,--out", o->out, "output GGUF path")->required();
      app.add_option("--preset", o->preset,
                     "a named shape (gemma-2b, llama2-7b, tinyllama-1.1b, base); shape flags are "
                     "ignored with it");
      app.add_option("--layers", o->layers, "number of layers")
          ->capture_default_str()
          ->check(CLI::Range(1, 4096));
      app.add_option("--embd", o->embd, "model width")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 16));
      app.add_option("--heads", o->heads,
                     "query heads, one value or a comma list per layer (0 = no attention)")
          ->capture_default_str();
      app.add_option("--kv-heads", o->kv_heads,
                     "KV heads, one value or a comma list (default = heads)");
      app.add_option("--ff", o->ff, "FFN width, one value or a comma list (0 = no FFN)")
          ->capture_default_str();
      app.add_option("--head-dim", o->head_dim,
                     "head size (0 = embd / heads of the first layer with heads)")
          ->capture_default_str();
      app.add_option("--vocab", o->vocab, "vocabulary size (not with --vocab-from)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 22))
          ->each([o](const std::string&) { o->vocab_set = true; });
      app.add_option("--vocab-from", o->vocab_from, "copy the tokenizer from this GGUF")
          ->check(CLI::ExistingFile);
      app.add_option("--ctx", o->ctx, "training context length written to metadata")
          ->capture_default_str();
      app.add_option("--type", o->type, "weight type: f32, f16, q8_0, q4_0")->capture_default_str();
      app.add_option("--rope-base", o->rope_base, "RoPE base")->capture_default_str();
      app.add_option("--eps", o->eps, "RMSNorm epsilon")->capture_default_str();
      app.add_option("--std", o->std, "weight standard deviation")->capture_default_str();
      app.add_option("--seed", o->seed, "random seed")->capture_default_str();
      app.add_option("--name", o->name, "general.name");
      app.add_flag("--tied", o->tied, "tie the output head to the token embedding");
      return [o] { return run(*o); };
    }};

}  // namespace cmd_init_model
