// Generated tasks, scored by exact match, chosen so that each needs its expert: a cheap
// rule (the majority answer, the best surface rule, copying the input) gets far fewer
// right than a model that learned the skill. Their prompts look alike (digits, an operator
// or a short instruction, '=' or ':'), so a router must read them closely, and a mixed
// set needs two of the skills at once.
//
//   addition       "37+45="          -> "82"                    a, b in 0..99
//   subtraction    "82-45="          -> "37"                    0 <= b <= a <= 99
//   number_words   "4312 in words:"  -> " four thousand three hundred twelve"   0..9999
//   digit_reverse  "reverse 3819="   -> "9183"                  four-digit strings
//   add_words      "37+45 in words:" -> " eighty-two"           test only: addition, then words
//
// Splits keep items that give each other away on one side: a+b with b+a, a-b with
// a-(a-b), a digit string with its reverse (75% train, 10% valid, 15% test by the hash
// of that group's key).
#pragma once

#include <string>
#include <vector>

#include "clone/data/dedup.h"

namespace cln::data {

struct TaskItem {
  std::string prompt;
  std::string answer;  // exact match after trimming spaces
};

struct TaskSplitItem {
  TaskItem item;
  Split split;
};

// The trained tasks, in a fixed order, and the mixed (test-only) sets.
const std::vector<std::string>& task_names();
const std::vector<std::string>& mixed_task_names();
// Every item of a task or mixed set with its split (mixed sets: all test).
std::vector<TaskSplitItem> make_task(const std::string& task);

// "4312" -> "four thousand three hundred twelve" (0..9999; throws outside).
std::string number_words(int n);

// The task's best cheap rule: addition and subtraction digit by digit without carries or
// borrows, number_words digit by digit ("four three one two"), digit_reverse swapping
// the first and last digits, add_words the words of the digit-wise sum.
std::string surface_rule(const std::string& task, const std::string& prompt);
// The prompt's own operand copied as the answer (the first number, or the digits).
std::string copy_input(const std::string& task, const std::string& prompt);

}  // namespace cln::data
