// Asserting that a call fails with a clone::Error whose message names what is wrong.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "clone/core/error.h"

namespace cln::test_util {

// Runs f; fails the test unless it throws an Error whose message contains `part`.
inline void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected an error naming \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace cln::test_util
