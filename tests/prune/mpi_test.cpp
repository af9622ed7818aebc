// clone tailor under `mpirun -np 2` gives what one process gives: the same candidates, the
// same numbers and the same model, byte for byte. Skipped (saying why) when the build has
// no MPI or mpirun is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "clone/data/tokenizer_train.h"
#include "clone/prune/ranks.h"
#include "clone/train/llama.h"
#include "prune/fixture.h"

using namespace cln;
namespace fs = std::filesystem;

using data::testing::slurp;

TEST(TailorMpi, TwoRanksGiveWhatOneProcessGives) {
  if (!prune::Ranks::built_with_mpi()) GTEST_SKIP() << "built without MPI (libopenmpi-dev)";
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "no mpirun (openmpi-bin)";
  const auto t = cln::prune::testing::tiny_model("tailor-mpi", 3);
  const std::string dir = data::testing::temp_dir("tailor-mpi-run");
  const std::string args =
      std::string(" tailor -m ") + t.path + " --data " + t.data +
      " --units magnitude --val-len 16 --val-windows 2 --calib-len 16 --random-samples 4"
      " --rounds 1 --per-round 3 --recover-steps 0 -t 1 --out ";
  const std::string one = std::string(CLONE_CLI) + args + dir + "/one > " + dir + "/one.log 2>&1";
  const std::string two =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
      "--oversubscribe -np 2 " +
      std::string(CLONE_CLI) + args + dir + "/two > " + dir + "/two.log 2>&1";
  const int r1 = std::system(one.c_str()), r2 = std::system(two.c_str());
  // Exit 0 (within budget) or 3 (the closest over budget): the same either way.
  ASSERT_TRUE(WIFEXITED(r1) && WIFEXITED(r2)) << slurp(dir + "/two.log");
  EXPECT_EQ(WEXITSTATUS(r1), WEXITSTATUS(r2)) << slurp(dir + "/two.log");
  ASSERT_TRUE(fs::exists(dir + "/two/model.gguf")) << slurp(dir + "/two.log");
  EXPECT_EQ(slurp(dir + "/one/candidates.csv"), slurp(dir + "/two/candidates.csv"));
  EXPECT_EQ(slurp(dir + "/one/model.gguf"), slurp(dir + "/two/model.gguf"));
  EXPECT_EQ(slurp(dir + "/one/summary.md"), slurp(dir + "/two/summary.md"));
  // One report: rank 1 logged nothing of its own.
  const std::string log = slurp(dir + "/two.log");
  size_t n = 0;
  for (size_t at = log.find("tailor: best"); at != std::string::npos;
       at = log.find("tailor: best", at + 1))
    ++n;
  EXPECT_EQ(n, 1u) << log;
}
