// Checkpoints that resume a training run bit for bit.
// Format: "CLCK", version, the run's JSON description (shape, seed, data), step, AdamW's
// step count, then every parameter (name, shape, values) with its AdamW m and v.
// Written to path.tmp, then renamed, so a crash never leaves half a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/train/optim.h"

namespace cln::train {

void save_checkpoint(const std::string& path, const std::string& meta_json, int64_t step,
                     AdamW& opt);
// Restores weights and optimizer state; returns the step to continue from. Throws
// cln::Error if the file is not a checkpoint or its parameters differ in name or shape
// (the message names the first difference).
int64_t load_checkpoint(const std::string& path, AdamW& opt, std::string* meta_json);

// The run's description a checkpoint was written with (its header only).
std::string checkpoint_meta(const std::string& path);

// Restores a run from its checkpoint when the run's description (meta_json) agrees with
// the one it was written with on every key in `keys` (when empty: every key either has
// but "threads" and "steps"; checked before any tensor is read); returns the step to continue from.
// Another thread count only warns (last-bit differences); another step count re-targets the
// schedule from the resumed step on (a note says so). Throws naming the key that differs.
int64_t resume_run(const std::string& ckpt, AdamW& opt, const std::string& meta_json,
                   const std::vector<std::string>& keys);

// Keeps the header and the rows of a CSV whose first column is below `step` (a resumed
// run rewrites the rest, so the curve equals an uninterrupted run's).
void truncate_csv(const std::string& path, int64_t step);

}  // namespace cln::train
