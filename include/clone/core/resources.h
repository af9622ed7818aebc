// Data clone reads at run time, found without any path compiled in: the device profiles,
// the shipped models (learned DVFS policies under models/dvfs/) and the shared data (the
// Azure traces under shared/data/). Each kind is looked up, in this order:
//   1. a folder given on the command line (set_resource_dir, from e.g. --profiles-dir);
//   2. an environment variable (CLONE_PROFILES, CLONE_MODELS, CLONE_SHARED);
//   3. beside the running executable: <prefix>/bin/clone reads <prefix>/share/clone/<kind>
//      (the installed layout; the build tree lays out the same with symlinks).
// A folder given explicitly (1 or 2) that does not exist is an error, not skipped; when
// nothing is found the error lists every place looked at.
#pragma once

#include <string>
#include <vector>

namespace cln {

enum class Resource { Profiles, Models, Shared };

const char* resource_name(Resource kind);  // "profiles", "models", "shared"
const char* resource_env(Resource kind);   // "CLONE_PROFILES", "CLONE_MODELS", "CLONE_SHARED"

// A folder for `kind` from the command line; `origin` names where it came from in errors
// (default "--profiles-dir", "--models-dir", "--shared-dir"). An empty dir forgets it.
void set_resource_dir(Resource kind, const std::string& dir, const std::string& origin = "");

// The folder of `kind` per the order above. Throws cln::Error listing every place looked.
std::string resource_dir(Resource kind);
// resource_dir(kind) + "/" + relative.
std::string resource_path(Resource kind, const std::string& relative);

// One place resource_dir looks, in order, and whether it was set / exists.
struct ResourcePlace {
  std::string where;  // "--profiles-dir", "$CLONE_PROFILES", "beside the executable /x/bin/clone"
  std::string dir;    // empty when not set
  bool exists = false;
};
std::vector<ResourcePlace> resource_places(Resource kind);

// The running program's own path (/proc/self/exe); empty if it cannot be read.
std::string executable_path();

}  // namespace cln
