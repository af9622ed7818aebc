// clone: the command-line front end. Subcommands register themselves (subcommand.h);
// every error on bad input reaches here as cln::Error and is printed, exit code 1.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "clone/core/error.h"
#include "subcommand.h"

namespace cln::cli {
std::vector<Subcommand>& registry() {
  static std::vector<Subcommand> r;
  return r;
}
}  // namespace cln::cli

int main(int argc, char** argv) {
  CLI::App app{"clone: LLMs on edge devices within a latency SLO, with little energy"};
  app.require_subcommand(1);
  auto& reg = cln::cli::registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, cln::cli::Runner> runners;
  for (auto& s : reg) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    runners[sub] = s.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clone: error: %s\n", e.what());
    return 1;
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const cln::Error& e) {
    std::fprintf(stderr, "clone: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clone: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
