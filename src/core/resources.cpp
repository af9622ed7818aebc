#include "clone/core/resources.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "clone/core/error.h"

namespace cln {

namespace fs = std::filesystem;

namespace {

std::string flag_name(Resource kind) {
  return std::string("--") + resource_name(kind) + "-dir";
}

struct Given {
  std::string dir, origin;
};

std::mutex& given_mutex() {
  static std::mutex m;
  return m;
}
std::array<Given, 3>& given() {
  static std::array<Given, 3> g;
  return g;
}

size_t index(Resource kind) {
  return static_cast<size_t>(kind);
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p, ec);
}

}  // namespace

const char* resource_name(Resource kind) {
  switch (kind) {
    case Resource::Profiles:
      return "profiles";
    case Resource::Models:
      return "models";
    case Resource::Shared:
      return "shared";
  }
  return "?";
}

const char* resource_env(Resource kind) {
  switch (kind) {
    case Resource::Profiles:
      return "CLONE_PROFILES";
    case Resource::Models:
      return "CLONE_MODELS";
    case Resource::Shared:
      return "CLONE_SHARED";
  }
  return "?";
}

void set_resource_dir(Resource kind, const std::string& dir, const std::string& origin) {
  std::lock_guard<std::mutex> lock(given_mutex());
  given()[index(kind)] = {dir, origin.empty() ? flag_name(kind) : origin};
}

std::string executable_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::vector<ResourcePlace> resource_places(Resource kind) {
  std::vector<ResourcePlace> out;
  Given g;
  {
    std::lock_guard<std::mutex> lock(given_mutex());
    g = given()[index(kind)];
  }
  out.push_back({g.dir.empty() ? flag_name(kind) : g.origin, g.dir, is_dir(g.dir)});
  const char* e = std::getenv(resource_env(kind));
  const std::string env = e ? e : "";
  out.push_back({std::string("$") + resource_env(kind), env, is_dir(env)});
  const std::string exe = executable_path();
  std::string beside;
  if (!exe.empty())
    beside = (fs::path(exe).parent_path().parent_path() / "share" / "clone" / resource_name(kind))
                 .lexically_normal()
                 .string();
  out.push_back({"beside the executable " + (exe.empty() ? "(unknown: no /proc/self/exe)" : exe),
                 beside, is_dir(beside)});
  return out;
}

std::string resource_dir(Resource kind) {
  const auto places = resource_places(kind);
  for (size_t i = 0; i < places.size(); ++i) {
    const auto& p = places[i];
    if (p.exists) return p.dir;
    // A folder asked for by name that is not there is a mistake to report, not to skip.
    if (i < 2 && !p.dir.empty())
      fail("the ", resource_name(kind), " folder ", p.dir, " (from ", p.where,
           ") does not exist or is not a folder");
  }
  std::ostringstream os;
  os << "cannot find the " << resource_name(kind) << " folder; looked at:";
  for (const auto& p : places) {
    os << "\n  " << p.where << ": ";
    if (p.dir.empty())
      os << "not set";
    else
      os << p.dir << " (not there)";
  }
  os << "\n(give the folder with " << flag_name(kind) << " or $" << resource_env(kind)
     << ", or install clone with `cmake --install`)";
  throw Error(os.str());
}

std::string resource_path(Resource kind, const std::string& relative) {
  return (fs::path(resource_dir(kind)) / relative).string();
}

}  // namespace cln
