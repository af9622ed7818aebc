// The oracle controller (internal): plans a whole request before it starts.
#pragma once

#include <memory>

#include "clone/dvfs/policy.h"

namespace cln::dvfs {

std::unique_ptr<Policy> make_oracle(std::shared_ptr<const device::CostModel> model,
                                    int64_t n_batch);

}  // namespace cln::dvfs
