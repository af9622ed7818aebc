// Step 5 of tailoring (tailor.h): the cut model recovered into the model that ships.
#include <cstdio>
#include <filesystem>

#include "clone/core/error.h"
#include "clone/prune/tailor.h"

namespace cln::prune {

namespace fs = std::filesystem;

double recover_best(const TailorOptions& o) {
  const fs::path dir(o.out_dir);
  const std::string pruned = (dir / "pruned.gguf").string(), out = (dir / "model.gguf").string();
  if (o.recovery.sched.steps <= 0) {  // the cut model is the result
    fs::copy_file(pruned, out, fs::copy_options::overwrite_existing);
    return 0;
  }
  train::FinetuneOptions r = o.recovery;
  r.model = pruned;
  r.teacher = r.kd_weight > 0 ? o.model : "";
  r.data_dir = o.data_dir;
  r.out_dir = (dir / "recover").string();
  r.model_out = out;
  r.threads = o.threads;
  if (o.log) {
    char b[256];
    std::snprintf(
        b, sizeof b, "tailor: recovering the best for %lld steps (%s) in %s",
        static_cast<long long>(r.sched.steps),
        r.teacher.empty() ? "fine-tuning on the corpora" : "distilled from the dense model",
        r.out_dir.c_str());
    o.log(b);
  }
  const train::TrainReport rep = train::train_finetune(r);
  if (!rep.done)
    fail("tailor: recovery stopped at step ", rep.last_step, " of ", r.sched.steps,
         "; run again to resume it");
  Validation v = o.val;
  v.data_dir = o.data_dir;
  v.threads = o.threads;
  return validation_ppl(out, v);
}

}  // namespace cln::prune
