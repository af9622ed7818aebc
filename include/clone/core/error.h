// Errors: every failure on bad input throws cln::Error with a message that names
// what is wrong (the file, the key or tensor, the expected and actual values).
// The C++ namespace is `cln`, not `clone`: glibc declares a function ::clone (clone(2))
// in <sched.h>, which every threaded program includes, and a namespace cannot share
// that name.
#pragma once

#include <stdexcept>
#include <string>

namespace cln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Formats with operator<< so call sites stay short:  fail("tensor ", name, " has ", n, " dims");
template <typename... Args>
[[noreturn]] void fail(const Args&... args);

}  // namespace cln

#include <sstream>
namespace cln {
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace cln
