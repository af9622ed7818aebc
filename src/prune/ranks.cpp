#include "clone/prune/ranks.h"

#include <cstdlib>

#ifdef CLONE_HAVE_MPI
#include <mpi.h>
#endif

namespace cln::prune {

bool Ranks::built_with_mpi() {
#ifdef CLONE_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Ranks::Ranks() {
#ifdef CLONE_HAVE_MPI
  // Only under a launcher (Open MPI's or a PMI one): a plain run stays a single process.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE")) return;
  int up = 0;
  MPI_Initialized(&up);
  if (!up) {
    MPI_Init(nullptr, nullptr);
    std::atexit([] {
      int done = 0;
      MPI_Finalized(&done);
      if (!done) MPI_Finalize();
    });
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  mpi_ = true;
#endif
}

Ranks& Ranks::world() {
  static Ranks r;
  return r;
}

void Ranks::sum(std::vector<double>& v) const {
#ifdef CLONE_HAVE_MPI
  if (mpi_ && size_ > 1)
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
#else
  (void)v;
#endif
}

}  // namespace cln::prune
