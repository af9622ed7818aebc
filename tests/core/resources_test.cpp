// Run-time data lookup: a flag beats the environment, which beats the folder beside the
// executable (this test binary sits in <build>/bin, beside <build>/share/clone, as `clone`
// does); a folder named explicitly that is not there is an error naming it.
#include "clone/core/resources.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "clone/core/error.h"

namespace cln {
namespace {

namespace fs = std::filesystem;

// Clears the flag and the variable for one kind, and restores the variable after.
class ResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* e = std::getenv("CLONE_PROFILES")) saved_ = e, had_ = true;
    unsetenv("CLONE_PROFILES");
    set_resource_dir(Resource::Profiles, "");
    dir_ = fs::path(CLONE_BINARY_DIR) / "resources_test";
    fs::create_directories(dir_ / "a");
    fs::create_directories(dir_ / "b");
  }
  void TearDown() override {
    set_resource_dir(Resource::Profiles, "");
    if (had_) setenv("CLONE_PROFILES", saved_.c_str(), 1);
  }
  std::string saved_;
  bool had_ = false;
  fs::path dir_;
};

std::string error_of(Resource kind) {
  try {
    resource_dir(kind);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(ResourceTest, BesideTheExecutableInTheBuildTree) {
  const std::string exe = executable_path();
  EXPECT_EQ(fs::path(exe).parent_path(), fs::path(CLONE_BINARY_DIR) / "bin") << exe;
  const fs::path want = fs::path(CLONE_BINARY_DIR) / "share" / "clone" / "profiles";
  EXPECT_EQ(fs::path(resource_dir(Resource::Profiles)), want.lexically_normal());
  EXPECT_TRUE(fs::exists(resource_path(Resource::Profiles, "orin-nx-16gb.json")));
  EXPECT_TRUE(fs::exists(resource_path(Resource::Models, "dvfs/orin-nx-16gb.json")));
}

TEST_F(ResourceTest, FlagBeatsEnvironmentBeatsBinary) {
  setenv("CLONE_PROFILES", (dir_ / "b").c_str(), 1);
  EXPECT_EQ(resource_dir(Resource::Profiles), (dir_ / "b").string());
  set_resource_dir(Resource::Profiles, (dir_ / "a").string(), "--profiles-dir");
  EXPECT_EQ(resource_dir(Resource::Profiles), (dir_ / "a").string());
  EXPECT_EQ(resource_path(Resource::Profiles, "x.json"), (dir_ / "a" / "x.json").string());
  set_resource_dir(Resource::Profiles, "");
  EXPECT_EQ(resource_dir(Resource::Profiles), (dir_ / "b").string());
  // Other kinds are not affected.
  EXPECT_NE(resource_dir(Resource::Models), (dir_ / "b").string());
}

TEST_F(ResourceTest, AFolderNamedExplicitlyMustExist) {
  setenv("CLONE_PROFILES", (dir_ / "missing").c_str(), 1);
  std::string e = error_of(Resource::Profiles);
  EXPECT_NE(e.find("$CLONE_PROFILES"), std::string::npos) << e;
  EXPECT_NE(e.find((dir_ / "missing").string()), std::string::npos) << e;
  unsetenv("CLONE_PROFILES");
  set_resource_dir(Resource::Profiles, (dir_ / "gone").string(), "--profiles-dir");
  e = error_of(Resource::Profiles);
  EXPECT_NE(e.find("--profiles-dir"), std::string::npos) << e;
  EXPECT_NE(e.find((dir_ / "gone").string()), std::string::npos) << e;
}

TEST_F(ResourceTest, PlacesAreListedInOrder) {
  setenv("CLONE_PROFILES", (dir_ / "b").c_str(), 1);
  const auto p = resource_places(Resource::Profiles);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].where, "--profiles-dir");
  EXPECT_TRUE(p[0].dir.empty());
  EXPECT_FALSE(p[0].exists);
  EXPECT_EQ(p[1].where, "$CLONE_PROFILES");
  EXPECT_TRUE(p[1].exists);
  EXPECT_NE(p[2].where.find(executable_path()), std::string::npos) << p[2].where;
  EXPECT_EQ(fs::path(p[2].dir).filename(), "profiles");
  EXPECT_STREQ(resource_env(Resource::Shared), "CLONE_SHARED");
  EXPECT_STREQ(resource_name(Resource::Models), "models");
}

}  // namespace
}  // namespace cln
