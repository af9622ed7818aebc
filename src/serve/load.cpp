#include "clone/serve/load.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/core/stats.h"

namespace cln::serve {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double since(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One streamed request as the client saw it.
struct Sample {
  double start = 0, end = 0;  // seconds since the run began
  double ttft = 0, tpot = 0;
  int64_t tokens = 0;
};

}  // namespace

double resident_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0;
}

LoadResult run_load(const LoadOptions& o, bool sample_rss) {
  if (o.clients < 1) fail("load: at least one client");
  if (!(o.seconds > 0) || o.warmup_s < 0) fail("load: the run needs a positive length");
  if (o.requests_per_client < 0) fail("load: requests per client must be 0 (no limit) or more");
  if (o.min_tokens < 1 || o.max_tokens < o.min_tokens) fail("load: bad token range");
  if (o.prompts.empty()) fail("load: no prompts");
  const auto t0 = Clock::now();
  const double stop_at = o.warmup_s + o.seconds;
  std::mutex mu;
  std::vector<Sample> samples;
  LoadResult r;
  r.clients = o.clients;

  auto client = [&](int id) {
    Rng rng(o.seed * 1000003ULL + static_cast<uint64_t>(id));
    httplib::Client cl(o.host, o.port);
    cl.set_read_timeout(600, 0);
    cl.set_keep_alive(true);
    size_t next_prompt = rng.below(o.prompts.size());
    for (int64_t sent = 0; since(t0, Clock::now()) < stop_at &&
                           (o.requests_per_client == 0 || sent < o.requests_per_client);
         ++sent) {
      json ext = {{"ignore_eos", true}};
      if (o.routed) {
        ext["experts"] = "auto";
      } else if (o.experts.empty()) {
        ext["experts"] = "none";
      } else {  // none, one, or an equal mix of two: the batch holds different mixtures
        const uint64_t k = rng.below(3);
        if (k == 0) {
          ext["experts"] = "none";
        } else {
          json names = json::array({o.experts[rng.below(o.experts.size())]});
          if (k == 2 && o.experts.size() > 1) {
            std::string second;
            do second = o.experts[rng.below(o.experts.size())];
            while (second == names[0]);
            names.push_back(second);
          }
          ext["experts"] = names;
        }
      }
      const int64_t n =
          o.min_tokens +
          static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.max_tokens - o.min_tokens + 1)));
      const json body = {{"prompt", o.prompts[next_prompt++ % o.prompts.size()]},
                         {"max_tokens", n},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"temperature", 0.8},
                         {"seed", rng.below(1u << 30)},
                         {"clone", ext}};
      Sample s;
      const auto start = Clock::now();
      s.start = since(t0, start);
      Clock::time_point first{}, last{};
      int64_t chunks = 0;
      std::string buf, raw;
      bool done = false;
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        if (raw.size() < 4096) raw.append(data, std::min<size_t>(len, 4096));
        buf.append(data, len);
        size_t at;
        while ((at = buf.find("\n\n")) != std::string::npos) {
          const std::string ev = buf.substr(0, at);
          buf.erase(0, at + 2);
          if (ev.rfind("data: ", 0) != 0) continue;
          if (ev.compare(6, std::string::npos, "[DONE]") == 0) {
            done = true;
            continue;
          }
          const json j = json::parse(ev.substr(6), nullptr, false);
          if (j.is_discarded()) continue;
          if (j.contains("usage") && j["usage"].is_object()) {
            s.tokens = j["usage"].value("completion_tokens", int64_t{0});
            continue;
          }
          const auto& text = j["choices"][0]["text"];
          if (text.is_string() && !text.get<std::string>().empty()) {
            // Time of the first and last text chunk (a chunk is a token, or a few when a
            // character's bytes came from several tokens).
            const auto now = Clock::now();
            if (chunks++ == 0) first = now;
            last = now;
          }
        }
        return true;
      };
      const auto res = cl.send(req);
      const auto end = Clock::now();
      s.end = since(t0, end);
      std::string err;
      if (!res)
        err = "connection: " + httplib::to_string(res.error()) + " after " +
              std::to_string(since(start, end)) + " s and " + std::to_string(chunks) + " chunks";
      else if (res->status != 200)
        err = "HTTP " + std::to_string(res->status) + ": " + raw;
      else if (!done)
        err = "the stream ended without [DONE]";
      else if (s.tokens != n)
        err = "got " + std::to_string(s.tokens) + " of " + std::to_string(n) + " tokens";
      if (chunks > 0) {
        s.ttft = since(start, first);
        s.tpot = s.tokens > 1 ? since(first, last) / static_cast<double>(s.tokens - 1) : 0;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!err.empty()) {
        ++r.errors;
        if (r.error_samples.size() < 5) r.error_samples.push_back(err);
      } else if (s.start >= o.warmup_s) {
        samples.push_back(s);
      }
      if (!res) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };

  std::atomic<bool> finished{false};
  std::thread rss;
  if (sample_rss)
    rss = std::thread([&] {
      const double marks[3] = {o.warmup_s, o.warmup_s + o.seconds / 2, stop_at};
      double* out[3] = {&r.rss_start_mib, &r.rss_mid_mib, &r.rss_end_mib};
      for (int i = 0; i < 3; ++i) {
        while (!finished && since(t0, Clock::now()) < marks[i])
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        *out[i] = resident_mib();
      }
    });
  std::vector<std::thread> th;
  for (int i = 0; i < o.clients; ++i) th.emplace_back(client, i);
  for (auto& t : th) t.join();
  finished = true;
  if (rss.joinable()) rss.join();

  std::vector<double> ttft, tpot;
  double last_end = o.warmup_s;
  for (const Sample& s : samples) {
    ++r.requests;
    r.tokens += s.tokens;
    ttft.push_back(s.ttft);
    if (s.tokens > 1) tpot.push_back(s.tpot);
    last_end = std::max(last_end, s.end);
  }
  r.seconds = last_end - o.warmup_s;
  if (!ttft.empty()) r.ttft_p50_s = percentile(ttft, 50), r.ttft_p99_s = percentile(ttft, 99);
  if (!tpot.empty()) r.tpot_p50_s = percentile(tpot, 50), r.tpot_p99_s = percentile(tpot, 99);
  if (r.seconds > 0) {
    r.tokens_per_s = static_cast<double>(r.tokens) / r.seconds;
    r.requests_per_s = static_cast<double>(r.requests) / r.seconds;
  }
  return r;
}

Table load_table(const std::vector<LoadResult>& rows) {
  Table t({"server", "clients", "requests", "errors", "tokens/s", "requests/s", "TTFT P50 (ms)",
           "TTFT P99 (ms)", "TPOT P50 (ms)", "TPOT P99 (ms)", "RSS start/mid/end (MiB)"});
  for (const LoadResult& r : rows) {
    char rss[96];
    std::snprintf(rss, sizeof rss, "%.0f / %.0f / %.0f", r.rss_start_mib, r.rss_mid_mib,
                  r.rss_end_mib);
    t.add({r.label, static_cast<long long>(r.clients), static_cast<long long>(r.requests),
           static_cast<long long>(r.errors), r.tokens_per_s, r.requests_per_s, 1e3 * r.ttft_p50_s,
           1e3 * r.ttft_p99_s, 1e3 * r.tpot_p50_s, 1e3 * r.tpot_p99_s, std::string(rss)});
  }
  t.set_precision(1);
  return t;
}

}  // namespace cln::serve
