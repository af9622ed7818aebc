#include "clone/data/tasks.h"

#include <algorithm>

#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/data/corpus.h"

namespace cln::data {

namespace {

Split split_of_key(const std::string& key) {
  const uint64_t b = fnv1a64(key) % 100;
  return b < 75 ? Split::Train : b < 85 ? Split::Valid : Split::Test;
}

const char* kOnes[] = {"zero",    "one",     "two",       "three",    "four",
                       "five",    "six",     "seven",     "eight",    "nine",
                       "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                       "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
const char* kTens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                       "ninety"};

// The digits of a number or operand at the start of s, and the rest.
std::pair<std::string, std::string> leading_digits(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return {s.substr(0, i), s.substr(i)};
}

// a and b of "a+b=" / "a-b=" / "a+b in words:"
std::pair<std::string, std::string> operands(const std::string& prompt) {
  const auto [a, rest] = leading_digits(prompt);
  if (a.empty() || rest.empty()) fail("task prompt '", prompt, "' has no operands");
  const auto [b, tail] = leading_digits(rest.substr(1));
  if (b.empty()) fail("task prompt '", prompt, "' has no second operand");
  return {a, b};
}

// Digit-wise combination of two numbers aligned right, without carries or borrows.
std::string digitwise(const std::string& a, const std::string& b, bool add) {
  const size_t n = std::max(a.size(), b.size());
  std::string out(n, '0');
  for (size_t k = 0; k < n; ++k) {
    const int x = k < a.size() ? a[a.size() - 1 - k] - '0' : 0;
    const int y = k < b.size() ? b[b.size() - 1 - k] - '0' : 0;
    out[n - 1 - k] = static_cast<char>('0' + (add ? (x + y) % 10 : std::abs(x - y)));
  }
  const size_t nz = out.find_first_not_of('0');
  return nz == std::string::npos ? "0" : out.substr(nz);
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> t = {"addition", "subtraction", "number_words",
                                             "digit_reverse"};
  return t;
}

const std::vector<std::string>& mixed_task_names() {
  static const std::vector<std::string> t = {"add_words"};
  return t;
}

std::string number_words(int n) {
  if (n < 0 || n > 9999) fail("number_words: ", n, " is outside 0..9999");
  if (n < 20) return kOnes[n];
  std::string s;
  const auto add = [&](const std::string& w) { s += (s.empty() ? "" : " ") + w; };
  if (n >= 1000) add(std::string(kOnes[n / 1000]) + " thousand");
  if (n % 1000 >= 100) add(std::string(kOnes[n % 1000 / 100]) + " hundred");
  const int r = n % 100;
  if (r >= 20)
    add(std::string(kTens[r / 10]) + (r % 10 ? std::string("-") + kOnes[r % 10] : ""));
  else if (r > 0)
    add(kOnes[r]);
  return s;
}

std::vector<TaskSplitItem> make_task(const std::string& task) {
  std::vector<TaskSplitItem> out;
  const auto put = [&](std::string prompt, std::string answer, const std::string& key) {
    out.push_back({{std::move(prompt), std::move(answer)}, split_of_key(task + ":" + key)});
  };
  if (task == "addition") {
    for (int a = 0; a < 100; ++a)
      for (int b = 0; b < 100; ++b)
        put(std::to_string(a) + "+" + std::to_string(b) + "=", std::to_string(a + b),
            std::to_string(std::min(a, b)) + "," + std::to_string(std::max(a, b)));
  } else if (task == "subtraction") {
    for (int a = 0; a < 100; ++a)
      for (int b = 0; b <= a; ++b)
        put(std::to_string(a) + "-" + std::to_string(b) + "=", std::to_string(a - b),
            std::to_string(a) + "," + std::to_string(std::min(b, a - b)));
  } else if (task == "number_words") {
    for (int n = 0; n < 10000; ++n)
      put(std::to_string(n) + " in words:", " " + number_words(n), std::to_string(n));
  } else if (task == "digit_reverse") {
    for (int n = 1000; n < 10000; ++n) {
      const std::string s = std::to_string(n);
      const std::string r(s.rbegin(), s.rend());
      put("reverse " + s + "=", r, std::min(s, r));
    }
  } else if (task == "add_words") {
    // Sums up to 198; every pair once (a <= b), so 5050 test items.
    for (int a = 0; a < 100; ++a)
      for (int b = a; b < 100; ++b)
        out.push_back({{std::to_string(a) + "+" + std::to_string(b) + " in words:",
                        " " + number_words(a + b)},
                       Split::Test});
  } else {
    fail("unknown task '", task, "' (tasks: addition, subtraction, number_words, digit_reverse; "
                                 "mixed: add_words)");
  }
  return out;
}

std::string surface_rule(const std::string& task, const std::string& prompt) {
  if (task == "addition" || task == "subtraction") {
    const auto [a, b] = operands(prompt);
    return digitwise(a, b, task == "addition");
  }
  if (task == "add_words") {
    const auto [a, b] = operands(prompt);
    return number_words(std::stoi(digitwise(a, b, true)));
  }
  if (task == "number_words") {
    const auto [n, rest] = leading_digits(prompt);
    std::string s;
    for (char c : n) s += (s.empty() ? "" : " ") + std::string(kOnes[c - '0']);
    return s;
  }
  if (task == "digit_reverse") {
    std::string s = leading_digits(prompt.substr(prompt.find(' ') + 1)).first;
    if (s.size() > 1) std::swap(s.front(), s.back());
    return s;
  }
  fail("no surface rule for task '", task, "'");
}

std::string copy_input(const std::string& task, const std::string& prompt) {
  if (task == "digit_reverse") return leading_digits(prompt.substr(prompt.find(' ') + 1)).first;
  return leading_digits(prompt).first;
}

}  // namespace cln::data
