#include "clone/core/duration.h"

#include <cstdio>

namespace cln {

std::string hms(double seconds) {
  const auto t = static_cast<long long>(seconds < 0 ? 0 : seconds);
  char b[32];
  std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  return b;
}

}  // namespace cln
