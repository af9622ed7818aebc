// clone quantize: rewrite a model's weight matrices as F16, Q8_0 or Q4_0.
#include <cstdio>
#include <memory>

#include "clone/core/error.h"
#include "clone/engine/model_writer.h"
#include "subcommand.h"

namespace cmd_quantize {

struct Opts {
  std::string in, out, type;
};

int run(const Opts& o) {
  using namespace cln;
  const auto t = dtype_from_name(o.type);
  if (!t) fail("unknown type '", o.type, "' (f32, f16, q8_0, q4_0)");
  auto f = GgufFile::open(o.in);
  const int fallbacks = quantize_model(*f, *t, o.out);
  std::printf("wrote %s (%s)", o.out.c_str(), std::string(dtype_name(*t)).c_str());
  if (fallbacks)
    std::printf("; %d matrices whose rows are not whole %s blocks were written as f16", fallbacks,
                std::string(dtype_name(*t)).c_str());
  std::printf("\n");
  return 0;
}

const cln::cli::Register reg{
    "quantize", "Convert a model's weight matrices to f16, q8_0 or q4_0", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("input", o->in, "model GGUF (f32 or f16 weights)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("output", o->out, "output GGUF")->required();
      app.add_option("type", o->type, "target type: f16, q8_0, q4_0 (or f32)")->required();
      return [o] { return run(*o); };
    }};

}  // namespace cmd_quantize
