// Errors: every failure on bad input throws clone::Error with a message that names
// what is wrong (the file, the key or tensor, the expected and actual values).
#pragma once

#include <stdexcept>
#include <string>

namespace clone {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Formats with operator<< so call sites stay short:  fail("tensor ", name, " has ", n, " dims");
template <typename... Args>
[[noreturn]] void fail(const Args&... args);

}  // namespace clone

#include <sstream>
namespace clone {
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace clone
