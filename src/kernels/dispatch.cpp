// Target selection for tests and reports (see dispatch.h).
#include "kernels/dispatch.h"

#include "hwy/highway.h"
#include "hwy/targets.h"

namespace cln::kernels::detail {

std::vector<int64_t> available_targets() {
  return hwy::SupportedAndGeneratedTargets();
}

void force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
}

}  // namespace cln::kernels::detail
