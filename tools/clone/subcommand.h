// Each `clone <name>` lives in its own cmd_<name>.cpp and registers itself here:
//   static const cln::cli::Register reg{"run", "generate text", [](CLI::App& app) {
//     auto opts = std::make_shared<Opts>(); app.add_option(...);
//     return [opts] { return run(*opts); };  // called after parsing; returns the exit code
//   }};
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace cln::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App&)>;

struct Subcommand {
  std::string name;
  std::string help;
  Setup setup;
};

std::vector<Subcommand>& registry();

struct Register {
  Register(std::string name, std::string help, Setup setup) {
    registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace cln::cli
