// Checkpoints: the run's description, its step, and every trained tensor with its AdamW
// state, written atomically; and resuming a run from one.
#include "clone/train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "clone/core/error.h"

namespace cln::train {
namespace fs = std::filesystem;

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

namespace {
// Opens a checkpoint and reads its header up to the run's description, which it returns.
std::string open_checkpoint(std::ifstream& f, const std::string& path) {
  f.open(path, std::ios::binary);
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
  if (!f) fail(path, ": truncated checkpoint");
  return meta;
}
}  // namespace

std::string checkpoint_meta(const std::string& path) {
  std::ifstream f;
  return open_checkpoint(f, path);
}

int64_t load_checkpoint(const std::string& path, AdamW& opt, std::string* meta_json) {
  std::ifstream f;
  const std::string meta = open_checkpoint(f, path);
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

int64_t resume_run(const std::string& ckpt, AdamW& opt, const std::string& meta_json,
                   const std::vector<std::string>& keys) {
  const nlohmann::json meta = nlohmann::json::parse(meta_json);
  // The descriptions first: a run of another kind is named by what differs, not by the
  // first tensor whose shape does not match.
  const nlohmann::json j = nlohmann::json::parse(checkpoint_meta(ckpt));
  std::vector<std::string> check = keys;
  if (check.empty())
    for (const nlohmann::json* m : {&meta, &j})  // a key either run has
      for (const auto& item : m->items())
        if (item.key() != "threads" && item.key() != "steps" &&
            std::find(check.begin(), check.end(), item.key()) == check.end())
          check.push_back(item.key());
  for (const std::string& key : check)
    if (j.value(key, nlohmann::json()) != meta.value(key, nlohmann::json()))
      fail(ckpt, " was written by a run with ", key, " = ", j.value(key, nlohmann::json()).dump(),
           ", this run asks for ", meta.value(key, nlohmann::json()).dump(),
           " (use another --out or delete it)");
  const int64_t start = load_checkpoint(ckpt, opt, nullptr);
  if (j.value("threads", nlohmann::json()) != meta.value("threads", nlohmann::json()))
    std::fprintf(stderr,
                 "train: warning: %s was written with %s threads, this run uses %s; the loss "
                 "curve will differ in the last bits from an uninterrupted run\n",
                 ckpt.c_str(), j.value("threads", nlohmann::json()).dump().c_str(),
                 meta.value("threads", nlohmann::json()).dump().c_str());
  // A new step count re-targets the schedule from here on (a run shortened to fit a budget
  // or extended while validation still falls); the learning rate jumps to the new curve.
  if (j.value("steps", nlohmann::json()) != meta.value("steps", nlohmann::json()))
    std::fprintf(stderr,
                 "train: note: %s was written by a run of %s steps, this run asks for %s: the "
                 "schedule is re-targeted from step %lld on\n",
                 ckpt.c_str(), j.value("steps", nlohmann::json()).dump().c_str(),
                 meta.value("steps", nlohmann::json()).dump().c_str(),
                 static_cast<long long>(start));
  return start;
}

}  // namespace cln::train
