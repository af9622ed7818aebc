// The base-model training loop, checkpoints, the window sampler and evaluation.
#include "clone/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "clone/core/error.h"
#include "clone/kernels/thread_pool.h"
#include "clone/train/corpus.h"
#include "clone/train/tokenizer_train.h"

namespace cln::train {
namespace fs = std::filesystem;

void WindowSampler::add(std::string name, std::vector<uint16_t> tokens, double weight) {
  if (!(weight > 0)) fail("sampler: stream '", name, "' needs a positive weight");
  streams_.push_back({std::move(name), std::move(tokens), weight});
}

double WindowSampler::share(size_t i) const {
  double total = 0;
  for (const Stream& s : streams_) total += s.weight;
  return streams_[i].weight / total;
}

void WindowSampler::batch(uint64_t seed, int64_t step, int64_t n_seq, int64_t seq_len,
                          std::vector<int32_t>* tokens, std::vector<int32_t>* targets) const {
  if (streams_.empty()) fail("sampler: no token streams");
  double total = 0;
  for (const Stream& s : streams_) {
    if (static_cast<int64_t>(s.tokens.size()) < seq_len + 2)
      fail("sampler: stream '", s.name, "' has ", s.tokens.size(),
           " tokens, fewer than one window of ", seq_len + 1);
    total += s.weight;
  }
  Rng rng(seed * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(step) + 0x632be59bd9b4e019ull));
  rng.next();
  tokens->resize(static_cast<size_t>(n_seq * seq_len));
  targets->resize(static_cast<size_t>(n_seq * seq_len));
  for (int64_t b = 0; b < n_seq; ++b) {
    double u = rng.uniform() * total;
    size_t k = 0;
    while (k + 1 < streams_.size() && u >= streams_[k].weight) u -= streams_[k++].weight;
    const std::vector<uint16_t>& t = streams_[k].tokens;
    const uint64_t span = t.size() - static_cast<uint64_t>(seq_len) - 1;
    const uint64_t off = rng.next() % span;
    for (int64_t i = 0; i < seq_len; ++i) {
      (*tokens)[static_cast<size_t>(b * seq_len + i)] = t[off + static_cast<uint64_t>(i)];
      (*targets)[static_cast<size_t>(b * seq_len + i)] = t[off + static_cast<uint64_t>(i) + 1];
    }
  }
}

namespace {
template <typename T>
void put(std::ofstream& f, const T& v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
T get(std::ifstream& f, const std::string& path) {
  T v{};
  f.read(reinterpret_cast<char*>(&v), sizeof(T));
  if (!f) fail(path, ": truncated checkpoint");
  return v;
}
std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}
}  // namespace

void save_checkpoint(const std::string& path, const std::string& meta_json, int64_t step,
                     AdamW& opt) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot write checkpoint ", tmp);
    f.write("CLCK", 4);
    put<uint32_t>(f, 1);
    put<uint64_t>(f, meta_json.size());
    f.write(meta_json.data(), static_cast<std::streamsize>(meta_json.size()));
    put<int64_t>(f, step);
    put<int64_t>(f, opt.t());
    put<uint64_t>(f, opt.params().size());
    for (size_t k = 0; k < opt.params().size(); ++k) {
      const Tensor& p = *opt.params()[k];
      put<uint32_t>(f, static_cast<uint32_t>(p.name.size()));
      f.write(p.name.data(), static_cast<std::streamsize>(p.name.size()));
      put<uint32_t>(f, static_cast<uint32_t>(p.shape.size()));
      for (int64_t d : p.shape) put<int64_t>(f, d);
      const auto bytes = static_cast<std::streamsize>(p.numel() * 4);
      f.write(reinterpret_cast<const char*>(p.data()), bytes);
      f.write(reinterpret_cast<const char*>(opt.m()[k].data()), bytes);
      f.write(reinterpret_cast<const char*>(opt.v()[k].data()), bytes);
    }
    f.flush();
    if (!f) fail("cannot write checkpoint ", tmp, " (disk full?)");
  }
  fs::rename(tmp, path);
}

int64_t load_checkpoint(const std::string& path, AdamW& opt, std::string* meta_json) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open checkpoint ", path);
  char magic[4] = {};
  f.read(magic, 4);
  if (!f || std::memcmp(magic, "CLCK", 4) != 0) fail(path, ": not a clone checkpoint");
  const auto version = get<uint32_t>(f, path);
  if (version != 1) fail(path, ": checkpoint version ", version, " (expected 1)");
  const auto meta_len = get<uint64_t>(f, path);
  if (meta_len > (1u << 24)) fail(path, ": corrupt checkpoint header");
  std::string meta(meta_len, '\0');
  f.read(meta.data(), static_cast<std::streamsize>(meta_len));
  const auto step = get<int64_t>(f, path);
  const auto t = get<int64_t>(f, path);
  const auto n = get<uint64_t>(f, path);
  const auto& params = opt.params();
  if (n != params.size())
    fail(path, ": checkpoint of another shape: it holds ", n, " tensors, this model has ",
         params.size());
  // Read everything first: a mismatch found late must not leave the model half-restored.
  std::vector<std::vector<float>> w(n), m(n), v(n);
  for (size_t k = 0; k < n; ++k) {
    const Tensor& p = *params[k];
    const auto len = get<uint32_t>(f, path);
    if (len > 4096) fail(path, ": corrupt tensor name");
    std::string name(len, '\0');
    f.read(name.data(), len);
    const auto nd = get<uint32_t>(f, path);
    if (nd > 8) fail(path, ": corrupt tensor rank");
    std::vector<int64_t> shape(nd);
    for (auto& d : shape) d = get<int64_t>(f, path);
    if (name != p.name || shape != p.shape)
      fail(path, ": checkpoint of another shape: tensor ", k, " is ", name, " ", shape_str(shape),
           ", this model has ", p.name, " ", shape_str(p.shape));
    for (auto* dst : {&w[k], &m[k], &v[k]}) {
      dst->resize(static_cast<size_t>(p.numel()));
      f.read(reinterpret_cast<char*>(dst->data()), p.numel() * 4);
    }
    if (!f) fail(path, ": truncated checkpoint");
  }
  for (size_t k = 0; k < n; ++k) {
    std::memcpy(params[k]->data(), w[k].data(), w[k].size() * 4);
    opt.m()[k] = std::move(m[k]);
    opt.v()[k] = std::move(v[k]);
    params[k]->zero_grad();
  }
  opt.set_t(t);
  if (meta_json) *meta_json = meta;
  return step;
}

double train_step_flops(const ModelConfig& c, int64_t n_seq, int64_t seq_len) {
  const double tokens = static_cast<double>(n_seq * seq_len);
  double matrix = static_cast<double>(c.n_vocab * c.n_embd);  // output head
  double attn = 0;
  for (const LayerShape& l : c.layers) {
    matrix += static_cast<double>(
        c.n_embd * (l.n_head * c.head_dim_k + l.n_head_kv * (c.head_dim_k + c.head_dim_v)) +
        l.n_head * c.head_dim_v * c.n_embd + 3 * c.n_embd * l.n_ff);
    const double pairs = static_cast<double>(seq_len) * static_cast<double>(seq_len + 1) / 2.0;
    attn += 3.0 * 2.0 * static_cast<double>(l.n_head) * pairs *
            static_cast<double>(c.head_dim_k + c.head_dim_v) * static_cast<double>(n_seq);
  }
  return 6.0 * matrix * tokens + attn;
}

namespace {

std::string hms(double s) {
  const auto t = static_cast<long>(s < 0 ? 0 : s);
  char b[32];
  std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return b;
}

// Mean loss over windows [seq_len + 1] at fixed, evenly spaced offsets.
double stream_loss(const LlamaModel& m, const std::vector<uint16_t>& t, int64_t seq_len,
                   int64_t windows, int64_t batch, kernels::ThreadPool* pool, int64_t* counted) {
  const int64_t avail = static_cast<int64_t>(t.size()) - seq_len - 1;
  if (avail < 0) fail("evaluation: a stream of ", t.size(), " tokens is shorter than one window");
  windows = std::min<int64_t>(windows, avail / seq_len + 1);
  double total = 0;
  int64_t n = 0;
  for (int64_t w0 = 0; w0 < windows; w0 += batch) {
    const int64_t nb = std::min(batch, windows - w0);
    std::vector<int32_t> tok(static_cast<size_t>(nb * seq_len)), tgt(tok.size());
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t off = windows > 1 ? (w0 + b) * (avail / std::max<int64_t>(1, windows - 1)) : 0;
      for (int64_t i = 0; i < seq_len; ++i) {
        tok[static_cast<size_t>(b * seq_len + i)] = t[static_cast<size_t>(off + i)];
        tgt[static_cast<size_t>(b * seq_len + i)] = t[static_cast<size_t>(off + i + 1)];
      }
    }
    Graph g(pool);
    g.grad_enabled = false;
    TensorP loss = op::cross_entropy(g, m.forward(g, tok, nb, seq_len), tgt);
    total += double{loss->data()[0]} * static_cast<double>(nb * seq_len);
    n += nb * seq_len;
  }
  if (counted) *counted = n;
  return total / static_cast<double>(n);
}

void plot_loss(const std::string& dir) {
  const std::string png = (fs::path(dir) / "loss.png").string();
  const std::string csv = (fs::path(dir) / "loss.csv").string();
  const std::string valid = (fs::path(dir) / "valid.csv").string();
  std::string script = "set terminal pngcairo size 900,500; set output '" + png +
                       "'; set datafile separator ','; set key autotitle columnhead;"
                       " set xlabel 'step'; set ylabel 'loss (nats/token)'; set grid;"
                       " plot '" +
                       csv + "' using 1:3 with lines lw 1 title 'train'";
  if (fs::exists(valid))
    script += ", '" + valid + "' using 1:2 with linespoints lw 2 title 'valid'";
  const std::string cmd = "gnuplot -e \"" + script + "\" 2>/dev/null";
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "train: gnuplot failed; the loss curve is in %s\n", csv.c_str());
}

// Keeps the rows of a CSV whose first column is below `step` (a resumed run rewrites
// the rest, so the curve equals an uninterrupted run's).
void truncate_csv(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, out;
  bool header = true;
  while (std::getline(in, line)) {
    if (header || std::strtoll(line.c_str(), nullptr, 10) < step) out += line + "\n";
    header = false;
  }
  in.close();
  std::ofstream(path, std::ios::trunc) << out;
}

// Restores a run from its checkpoint when the run's description agrees with the one
// it was written with on every key in `keys` (all keys but "threads" when empty): the
// step to continue from. Another thread count only warns (last-bit differences).
int64_t resume_run(const std::string& ckpt, AdamW& opt, const nlohmann::json& meta,
                   const std::vector<std::string>& keys) {
  std::string old;
  const int64_t start = load_checkpoint(ckpt, opt, &old);
  const nlohmann::json j = nlohmann::json::parse(old);
  std::vector<std::string> check = keys;
  if (check.empty())
    for (const auto& item : meta.items())
      if (item.key() != "threads") check.push_back(item.key());
  for (const std::string& key : check)
    if (j.value(key, nlohmann::json()) != meta[key])
      fail(ckpt, " was written by a run with ", key, " = ", j.value(key, nlohmann::json()).dump(),
           ", this run asks for ", meta[key].dump(), " (use another --out or delete it)");
  if (j.value("threads", nlohmann::json()) != meta["threads"])
    std::fprintf(stderr,
                 "train: warning: %s was written with %s threads, this run uses %s; the loss "
                 "curve will differ in the last bits from an uninterrupted run\n",
                 ckpt.c_str(), j.value("threads", nlohmann::json()).dump().c_str(),
                 meta["threads"].dump().c_str());
  return start;
}

}  // namespace

std::vector<PerplexityRow> domain_perplexity(const LlamaModel& m, const std::string& data_dir,
                                             const std::string& split, int64_t seq_len,
                                             int64_t max_tokens, int threads) {
  kernels::ThreadPool pool(threads);
  const int32_t bos = 1;
  std::vector<PerplexityRow> rows;
  for (const std::string& d : domain_names()) {
    const TokenFile train = read_token_file(token_file_path(data_dir, d, "train"), bos);
    const TokenFile test = read_token_file(token_file_path(data_dir, d, split), bos);
    if (static_cast<int64_t>(train.n_vocab) != m.config().n_vocab)
      fail("token files of ", d, " use a vocabulary of ", train.n_vocab, ", the model has ",
           m.config().n_vocab);
    std::vector<double> counts(train.n_vocab, 1.0);
    for (uint16_t t : train.tokens) counts[t] += 1.0;
    double total = 0;
    for (double c : counts) total += c;
    const int64_t windows = std::max<int64_t>(1, max_tokens / seq_len);
    int64_t n = 0;
    const double loss = stream_loss(m, test.tokens, seq_len, windows, 8, &pool, &n);
    // the unigram over the same positions the model predicted
    double uni = 0;
    int64_t un = 0;
    const int64_t avail = static_cast<int64_t>(test.tokens.size()) - seq_len - 1;
    const int64_t w = std::min<int64_t>(windows, avail / seq_len + 1);
    for (int64_t k = 0; k < w; ++k) {
      const int64_t off = w > 1 ? k * (avail / std::max<int64_t>(1, w - 1)) : 0;
      for (int64_t i = 1; i <= seq_len; ++i) {
        uni -= std::log(counts[test.tokens[static_cast<size_t>(off + i)]] / total);
        ++un;
      }
    }
    rows.push_back({d, n, std::exp(loss), std::exp(uni / static_cast<double>(un))});
  }
  return rows;
}

TrainReport train_base(const BaseTrainOptions& o) {
  const std::string tok_path =
      o.tokenizer.empty() ? (fs::path(o.data_dir) / "tokenizer.model").string() : o.tokenizer;
  const Vocab vocab = vocab_from_sentencepiece(tok_path);
  const uint64_t fp = vocab_fingerprint(vocab);
  const int64_t V = static_cast<int64_t>(vocab.tokens.size());
  // Data: each domain's training stream, weighted by size^temperature.
  WindowSampler train;
  std::vector<std::pair<std::string, std::vector<uint16_t>>> valid;
  for (const std::string& d : domain_names()) {
    for (const char* split : {"train", "valid"}) {
      const std::string path = token_file_path(o.data_dir, d, split);
      TokenFile f = read_token_file(path, vocab.bos);
      if (f.fingerprint != fp || static_cast<int64_t>(f.n_vocab) != V)
        fail(path, " was encoded with another tokenizer than ", tok_path,
             " (rebuild with `clone data build`)");
      if (f.n_docs == 0) fail(path, ": no documents");
      if (std::string(split) == "train") {
        const double w = std::pow(static_cast<double>(f.tokens.size()), o.mix_temperature);
        train.add(d, std::move(f.tokens), w);
      } else {
        valid.emplace_back(d, std::move(f.tokens));
      }
    }
  }
  const ModelConfig cfg =
      llama_shape(V, o.n_embd, o.n_layer, o.n_head, o.n_head_kv, o.n_ff, o.seq_len);
  LlamaModel model = LlamaModel::init(cfg, o.seed);
  AdamW opt(model.params(), o.adam);
  kernels::ThreadPool pool(o.threads);

  nlohmann::json meta = {{"n_vocab", V},
                         {"n_embd", o.n_embd},
                         {"n_layer", o.n_layer},
                         {"n_head", o.n_head},
                         {"n_head_kv", o.n_head_kv},
                         {"n_ff", o.n_ff},
                         {"batch", o.batch},
                         {"seq_len", o.seq_len},
                         {"seed", o.seed},
                         {"steps", o.sched.steps},
                         {"lr", o.sched.lr},
                         {"warmup", o.sched.warmup},
                         {"tokenizer_fingerprint", fp},
                         {"threads", o.threads}};
  fs::create_directories(o.out_dir);
  const std::string ckpt = (fs::path(o.out_dir) / "checkpoint.bin").string();
  const std::string loss_csv = (fs::path(o.out_dir) / "loss.csv").string();
  const std::string valid_csv = (fs::path(o.out_dir) / "valid.csv").string();
  int64_t start = 0;
  if (o.resume && fs::exists(ckpt)) {
    start =
        resume_run(ckpt, opt, meta, {"batch", "seq_len", "seed", "steps", "tokenizer_fingerprint"});
    truncate_csv(loss_csv, start);
    truncate_csv(valid_csv, start);
    if (o.verbose)
      std::fprintf(stderr, "train: resumed from %s at step %lld\n", ckpt.c_str(),
                   static_cast<long long>(start));
  } else {
    std::ofstream(loss_csv, std::ios::trunc) << "step,lr,loss,grad_norm,tokens_per_s\n";
    std::ofstream(valid_csv, std::ios::trunc) << "step,valid_loss\n";
  }
  std::ofstream csv(loss_csv, std::ios::app);
  std::ofstream log((fs::path(o.out_dir) / "train.log").string(), std::ios::app);
  if (o.verbose) {
    char b[256];
    std::snprintf(b, sizeof b,
                  "train: %lld parameters, %d layers x %lld wide, vocab %lld, "
                  "%lld x %lld tokens per step, %lld steps\n",
                  static_cast<long long>(cfg.n_params()), static_cast<int>(o.n_layer),
                  static_cast<long long>(o.n_embd), static_cast<long long>(V),
                  static_cast<long long>(o.batch), static_cast<long long>(o.seq_len),
                  static_cast<long long>(o.sched.steps));
    std::fputs(b, stderr);
    log << b;
    for (size_t i = 0; i < train.size(); ++i)
      std::fprintf(stderr, "train: domain %-10s share %.3f\n", train.name(i).c_str(),
                   train.share(i));
  }

  TrainReport rep;
  rep.first_step = start;
  int64_t last_ckpt = start;
  const double tokens_per_step = static_cast<double>(o.batch * o.seq_len);
  double train_seconds = 0;
  int64_t timed_steps = 0;
  std::vector<int32_t> tokens, targets;
  int64_t step = start;
  for (; step < o.sched.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    train.batch(o.seed, step, o.batch, o.seq_len, &tokens, &targets);
    Graph g(&pool);
    TensorP loss = op::cross_entropy(g, model.forward(g, tokens, o.batch, o.seq_len), targets);
    const double lv = loss->data()[0];
    if (!std::isfinite(lv))
      fail("training stopped: the loss is ", lv, " at step ", step, "; the checkpoint of step ",
           last_ckpt, " in ", ckpt, " is intact (lower --lr or check the data)");
    g.backward(loss);
    const double lr = o.sched.at(step);
    const double gnorm = opt.step(lr);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_seconds += dt;
    ++timed_steps;
    const double tps = tokens_per_step * static_cast<double>(timed_steps) / train_seconds;
    rep.losses.push_back(lv);
    char row[160];
    std::snprintf(row, sizeof row, "%lld,%.9g,%.9g,%.9g,%.1f\n", static_cast<long long>(step), lr,
                  lv, gnorm, tokens_per_step / dt);
    csv << row;
    csv.flush();
    if (o.verbose && ((step + 1) % o.log_every == 0 || step == start)) {
      const double eta = static_cast<double>(o.sched.steps - step - 1) * train_seconds /
                         static_cast<double>(timed_steps);
      char b[256];
      std::snprintf(b, sizeof b,
                    "step %6lld/%lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | "
                    "elapsed %s | ETA %s\n",
                    static_cast<long long>(step + 1), static_cast<long long>(o.sched.steps), lv, lr,
                    gnorm, tps, hms(train_seconds).c_str(), hms(eta).c_str());
      std::fputs(b, stderr);
      log << b;
      log.flush();
    }
    const bool last = step + 1 == o.sched.steps;
    if (o.eval_every > 0 && ((step + 1) % o.eval_every == 0 || last)) {
      double sum = 0;
      std::string per;
      for (const auto& [d, t] : valid) {
        const double l = stream_loss(model, t, o.seq_len, o.eval_windows, o.batch, &pool, nullptr);
        sum += l;
        char b[64];
        std::snprintf(b, sizeof b, " %s %.3f", d.c_str(), l);
        per += b;
      }
      const double mean = sum / static_cast<double>(valid.size());
      char vrow[64];
      std::snprintf(vrow, sizeof vrow, "%lld,%.9g\n", static_cast<long long>(step), mean);
      std::ofstream(valid_csv, std::ios::app) << vrow;
      if (o.verbose) {
        char b[512];
        std::snprintf(b, sizeof b, "valid @%lld: mean %.4f |%s\n", static_cast<long long>(step + 1),
                      mean, per.c_str());
        std::fputs(b, stderr);
        log << b;
      }
    }
    if (o.ckpt_every > 0 && ((step + 1) % o.ckpt_every == 0 || last)) {
      save_checkpoint(ckpt, meta.dump(), step + 1, opt);
      last_ckpt = step + 1;
      plot_loss(o.out_dir);
    }
    if (o.stop_after >= 0 && step + 1 >= o.stop_after) {
      ++step;
      break;
    }
  }
  rep.last_step = step;
  rep.tokens_per_s =
      timed_steps ? tokens_per_step * static_cast<double>(timed_steps) / train_seconds : 0;
  if (step >= o.sched.steps) {
    const std::string out =
        o.model_out.empty() ? (fs::path(o.out_dir) / "model.gguf").string() : o.model_out;
    model.write_gguf(out, vocab,
                     {{"general.description",
                       "clone base model trained from scratch on Debian "
                       "text corpora (clone train base)"},
                      {"clone.training.run", meta.dump()}});
    if (o.verbose) std::fprintf(stderr, "train: wrote %s\n", out.c_str());
    if (o.test_tokens > 0) {
      const auto rows =
          domain_perplexity(model, o.data_dir, "test", o.seq_len, o.test_tokens, o.threads);
      std::ostringstream md;
      md << "| domain | test tokens | model perplexity | unigram perplexity "
            "|\n|---|---:|---:|---:|\n";
      for (const auto& r : rows) {
        char b[160];
        std::snprintf(b, sizeof b, "| %s | %lld | %.2f | %.2f |\n", r.domain.c_str(),
                      static_cast<long long>(r.tokens), r.model_ppl, r.unigram_ppl);
        md << b;
      }
      std::ofstream((fs::path(o.out_dir) / "perplexity.md").string()) << md.str();
      if (o.verbose) std::fputs(md.str().c_str(), stderr);
    }
  }
  return rep;
}

StepBench bench_train_step(const ModelConfig& c, int64_t n_seq, int64_t seq_len, int steps,
                           int threads) {
  if (steps < 1) fail("bench: at least one step");
  LlamaModel m = LlamaModel::init(c, 1);
  AdamW opt(m.params(), AdamWConfig{});
  kernels::ThreadPool pool(threads);
  Rng rng(5);
  std::vector<int32_t> tok(static_cast<size_t>(n_seq * seq_len)), tgt(tok.size());
  double total = 0;
  for (int s = 0; s <= steps; ++s) {
    for (size_t i = 0; i < tok.size(); ++i) {
      tok[i] = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(c.n_vocab));
      tgt[i] = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(c.n_vocab));
    }
    const auto t0 = std::chrono::steady_clock::now();
    Graph g(&pool);
    TensorP loss = op::cross_entropy(g, m.forward(g, tok, n_seq, seq_len), tgt);
    g.backward(loss);
    opt.step(1e-4);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) total += dt;  // step 0 warms caches and the buffer free list
  }
  StepBench b;
  b.params = c.n_params();
  b.step_s = total / steps;
  b.tokens_per_s = static_cast<double>(n_seq * seq_len) / b.step_s;
  b.gflops = train_step_flops(c, n_seq, seq_len) / b.step_s / 1e9;
  return b;
}

}  // namespace cln::train

namespace cln::train {

void task_batch(const std::vector<std::vector<int32_t>>& items,
                const std::vector<int32_t>& prompt_len, uint64_t seed, int64_t step, int64_t n_seq,
                int64_t seq_len, int32_t pad, std::vector<int32_t>* tokens,
                std::vector<int32_t>* targets) {
  if (items.empty()) fail("task batch: no items");
  Rng rng(seed * 0xd1b54a32d192ed03ull ^ (static_cast<uint64_t>(step) + 0x8cb92ba72f3d8dd7ull));
  rng.next();
  tokens->assign(static_cast<size_t>(n_seq * seq_len), pad);
  targets->assign(static_cast<size_t>(n_seq * seq_len), -1);
  for (int64_t b = 0; b < n_seq; ++b) {
    int64_t pos = 0;
    for (;;) {
      const size_t k = static_cast<size_t>(rng.next() % items.size());
      const std::vector<int32_t>& it = items[k];  // BOS prompt answer EOS
      const auto len = static_cast<int64_t>(it.size());
      if (len > seq_len + 1) fail("task item of ", len, " tokens does not fit a row of ", seq_len);
      if (pos + len - 1 > seq_len) break;
      for (int64_t i = 0; i + 1 < len; ++i) {
        const size_t at = static_cast<size_t>(b * seq_len + pos + i);
        (*tokens)[at] = it[static_cast<size_t>(i)];
        // predict the answer and EOS: positions whose next token is past the prompt
        if (i + 1 >= prompt_len[k]) (*targets)[at] = it[static_cast<size_t>(i + 1)];
      }
      pos += len - 1;
    }
  }
}

TrainReport train_lora(const LoraTrainOptions& o) {
  if (o.domain.empty() == o.task.empty()) fail("lora: give exactly one of a domain or a task");
  if (o.out.empty()) fail("lora: no output path");
  auto f = GgufFile::open(o.base);
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  LlamaModel model = LlamaModel::from_gguf(*f);
  if (tok.n_vocab() != model.config().n_vocab)
    fail(o.base, ": the tokenizer has ", tok.n_vocab(), " tokens, the model ",
         model.config().n_vocab);
  model.set_trainable(false);
  model.add_lora(o.rank, o.alpha, o.targets, o.seed);
  AdamW opt(model.lora_params(), o.adam);
  kernels::ThreadPool pool(o.threads);

  WindowSampler windows;
  std::vector<std::vector<int32_t>> items;
  std::vector<int32_t> prompt_len;
  if (!o.domain.empty()) {
    const std::string path = token_file_path(o.data_dir, o.domain, "train");
    TokenFile t = read_token_file(path, tok.bos());
    if (static_cast<int64_t>(t.n_vocab) != tok.n_vocab() ||
        t.fingerprint != vocab_fingerprint(tok.vocab()))
      fail(path, " was encoded with another tokenizer than the one inside ", o.base);
    if (t.n_docs == 0) fail(path, ": no documents");
    windows.add(o.domain, std::move(t.tokens), 1.0);
  } else {
    const std::string path = (fs::path(o.data_dir) / "tasks" / o.task / "train.jsonl").string();
    for (const TaskItem& it : read_jsonl_tasks(path)) {
      std::vector<int32_t> full = tok.encode(it.prompt + it.answer, true);
      const std::vector<int32_t> p = tok.encode(it.prompt, true);
      size_t common = 0;  // the answer starts where prompt and full part
      while (common < p.size() && common < full.size() && p[common] == full[common]) ++common;
      if (common == full.size()) continue;  // empty answer
      full.push_back(tok.eos());
      items.push_back(std::move(full));
      prompt_len.push_back(static_cast<int32_t>(common));
    }
    if (items.empty()) fail(path, ": no task items");
  }

  const std::string dir =
      o.out_dir.empty() ? fs::path(o.out).replace_extension("").string() + ".train" : o.out_dir;
  fs::create_directories(dir);
  std::string targets;
  for (const std::string& t : o.targets) targets += (targets.empty() ? "" : ",") + t;
  const nlohmann::json meta = {{"base_params", model.config().n_params()},
                               {"tokenizer_fingerprint", vocab_fingerprint(tok.vocab())},
                               {"domain", o.domain},
                               {"task", o.task},
                               {"rank", o.rank},
                               {"alpha", o.alpha},
                               {"targets", targets},
                               {"batch", o.batch},
                               {"seq_len", o.seq_len},
                               {"seed", o.seed},
                               {"steps", o.sched.steps},
                               {"lr", o.sched.lr},
                               {"warmup", o.sched.warmup},
                               {"threads", o.threads}};
  const std::string ckpt = (fs::path(dir) / "checkpoint.bin").string();
  const std::string loss_csv = (fs::path(dir) / "loss.csv").string();
  int64_t start = 0;
  if (o.resume && fs::exists(ckpt)) {
    start = resume_run(ckpt, opt, meta, {});
    truncate_csv(loss_csv, start);
    if (o.verbose)
      std::fprintf(stderr, "lora: resumed from %s at step %lld\n", ckpt.c_str(),
                   static_cast<long long>(start));
  } else {
    std::ofstream(loss_csv, std::ios::trunc) << "step,lr,loss,grad_norm,tokens_per_s\n";
  }
  std::ofstream csv(loss_csv, std::ios::app);
  std::ofstream log((fs::path(dir) / "train.log").string(),
                    start > 0 ? std::ios::app : std::ios::trunc);
  TrainReport rep;
  rep.first_step = start;
  int64_t last_ckpt = start;
  std::vector<int32_t> tokens, targets_buf;
  double seconds = 0;
  const double tokens_per_step = static_cast<double>(o.batch * o.seq_len);
  int64_t step = start;
  for (; step < o.sched.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!o.domain.empty())
      windows.batch(o.seed, step, o.batch, o.seq_len, &tokens, &targets_buf);
    else
      task_batch(items, prompt_len, o.seed, step, o.batch, o.seq_len, tok.eos(), &tokens,
                 &targets_buf);
    Graph g(&pool);
    TensorP loss = op::cross_entropy(g, model.forward(g, tokens, o.batch, o.seq_len), targets_buf);
    const double lv = loss->data()[0];
    if (!std::isfinite(lv))
      fail("LoRA training stopped: the loss is ", lv, " at step ", step,
           "; the checkpoint of step ", last_ckpt, " in ", ckpt, " is intact");
    g.backward(loss);
    const double lr = o.sched.at(step);
    const double gnorm = opt.step(lr);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds += dt;
    rep.losses.push_back(lv);
    char row[160];
    std::snprintf(row, sizeof row, "%lld,%.9g,%.9g,%.9g,%.1f\n", static_cast<long long>(step), lr,
                  lv, gnorm, tokens_per_step / dt);
    csv << row;
    csv.flush();
    const int64_t done = step + 1 - start;
    if (o.verbose && ((step + 1) % o.log_every == 0 || step == start)) {
      const double eta =
          static_cast<double>(o.sched.steps - step - 1) * seconds / static_cast<double>(done);
      char b[256];
      std::snprintf(b, sizeof b,
                    "lora step %5lld/%lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | "
                    "elapsed %s | ETA %s\n",
                    static_cast<long long>(step + 1), static_cast<long long>(o.sched.steps), lv, lr,
                    gnorm, tokens_per_step * static_cast<double>(done) / seconds,
                    hms(seconds).c_str(), hms(eta).c_str());
      std::fputs(b, stderr);
      log << b;
    }
    const bool stopping = o.stop_after >= 0 && step + 1 >= o.stop_after;
    if ((step + 1) % o.ckpt_every == 0 || step + 1 == o.sched.steps || stopping) {
      save_checkpoint(ckpt, meta.dump(), step + 1, opt);
      last_ckpt = step + 1;
    }
    if (stopping) {
      ++step;
      break;
    }
  }
  rep.last_step = step;
  rep.tokens_per_s =
      seconds > 0 ? tokens_per_step * static_cast<double>(step - start) / seconds : 0;
  if (step < o.sched.steps) return rep;  // stopped early: the checkpoint holds the state
  csv.close();
  plot_loss(dir);
  model.write_lora_gguf(o.out, o.domain.empty() ? o.task : o.domain);
  if (o.verbose) std::fprintf(stderr, "lora: wrote %s\n", o.out.c_str());
  return rep;
}

}  // namespace cln::train
