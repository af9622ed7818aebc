// Candidate evaluations spread over processes: under `mpirun -np N clone tailor ...` (a
// build with MPI: Debian's libopenmpi-dev) every rank runs the same deterministic search,
// evaluates its share of each batch of candidates, and the results are summed across ranks
// so every rank holds all of them; rank 0 alone writes files and logs. Started any other
// way, or built without MPI, there is one rank and MPI is never initialised.
#pragma once

#include <vector>

namespace cln::prune {

class Ranks {
 public:
  static Ranks& world();
  static bool built_with_mpi();
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Element-wise sum over the ranks, in place, the result on every rank.
  void sum(std::vector<double>& v) const;

 private:
  Ranks();
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
};

}  // namespace cln::prune
