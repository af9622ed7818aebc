// Durations as progress lines print them (elapsed, ETA).
#pragma once

#include <string>

namespace cln {

// "H:MM:SS"; negative durations print as 0:00:00.
std::string hms(double seconds);

}  // namespace cln
