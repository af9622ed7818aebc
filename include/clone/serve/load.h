// A load generator for OpenAI-compatible servers: concurrent streaming clients on
// loopback, each in a closed loop (send, read the stream to its end, send the next), for a
// fixed time. It measures what a client sees: time to the first streamed token, time per
// token after it, tokens and requests per second, errors; and, when the server runs in this
// process, its resident memory over the run (a leak shows as growth after warm-up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/core/table.h"

namespace cln::serve {

struct LoadOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  int clients = 64;
  double seconds = 60;
  double warmup_s = 5;              // requests that start before this are not counted
  int64_t requests_per_client = 0;  // a client stops after this many (0: only the time ends it)
  int64_t min_tokens = 16, max_tokens = 128;  // per request, uniform; EOS ignored
  std::vector<std::string> experts;           // each request names one or two of them (or none)
  bool routed = false;                        // each request asks the router instead ("auto")
  std::vector<std::string> prompts;           // cycled with a random start per client
  uint64_t seed = 1;
};

struct LoadResult {
  std::string label;
  int clients = 0;
  double seconds = 0;  // measured window (after warm-up)
  int64_t requests = 0, errors = 0, tokens = 0;
  std::vector<std::string> error_samples;  // the first few error messages
  double ttft_p50_s = 0, ttft_p99_s = 0, tpot_p50_s = 0, tpot_p99_s = 0;
  double tokens_per_s = 0, requests_per_s = 0;
  // Resident memory of this process (MiB) when the window starts, at its middle and at its
  // end; zero when not sampled.
  double rss_start_mib = 0, rss_mid_mib = 0, rss_end_mib = 0;
};

// Runs the clients against host:port; `sample_rss` reads /proc/self (the server must be in
// this process for that to mean anything).
LoadResult run_load(const LoadOptions& o, bool sample_rss);

// Resident set size of this process in MiB (/proc/self/status VmRSS); 0 if unavailable.
double resident_mib();

Table load_table(const std::vector<LoadResult>& rows);

}  // namespace cln::serve
