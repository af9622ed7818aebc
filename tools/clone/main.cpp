// clone: the command-line front end. Subcommands register themselves (subcommand.h);
// every error on bad input reaches here as cln::Error and is printed, exit code 1.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "clone/core/error.h"
#include "subcommand.h"

namespace cln::cli {
std::vector<Subcommand>& registry() {
  static std::vector<Subcommand> r;
  return r;
}
}  // namespace cln::cli

namespace {

// CLI11 handles --help before it complains about a word it does not know, so
// `clone tailor --help` would print the main help and succeed. Walk the leading words
// down the subcommand tree first: one that names no subcommand where one is expected is
// an error that names it. Returns the exit code, or -1 to go on parsing.
int reject_unknown_subcommand(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path = "clone";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return -1;  // options: CLI11's business
    auto subs = cur->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return -1;  // a command's own arguments
    CLI::App* next = nullptr;
    std::string have;
    for (CLI::App* s : subs) {
      if (s->check_name(word)) next = s;
      have += (have.empty() ? "" : ", ") + s->get_name();
    }
    if (!next) {
      std::fprintf(stderr, "clone: error: unknown subcommand \"%s\" of `%s` (have: %s)\n",
                   word.c_str(), path.c_str(), have.c_str());
      return static_cast<int>(CLI::ExitCodes::ExtrasError);  // as CLI11 for unexpected words
    }
    cur = next;
    path += " " + word;
  }
  return -1;
}

}  // namespace

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
  if (const int rc = reject_unknown_subcommand(app, argc, argv); rc >= 0) return rc;
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
