// The serving loop: requests wait in a bounded queue, are admitted into the slots of a
// continuous batch (engine/batch.h) with the expert mixture the router (or the caller)
// chose, and advance together one pass at a time: a prompt chunk or one new token each.
// Tokens stream out as soon as they are chosen; a cancelled request (a client that left)
// frees its slot before the next pass; stop() drains what was admitted and queued.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "clone/dvfs/batch_cosim.h"
#include "clone/engine/batch.h"
#include "clone/engine/generate.h"
#include "clone/engine/sampler.h"
#include "clone/serve/embed.h"
#include "clone/serve/length.h"
#include "clone/serve/router.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::serve {

// How a request's experts are chosen: by the router, by name (uniform average: 1/n each), or
// given.
struct ExpertChoice {
  enum class Mode { Router, Named, Weights, None } mode = Mode::Router;
  std::vector<std::pair<std::string, double>> weights;  // Named: weight 1 each
};

struct GenRequest {
  std::vector<int32_t> prompt;  // BOS first
  int64_t max_tokens = 128;
  SamplerParams sampling;
  ExpertChoice experts;
  bool ignore_eos = false;
  // The SLO the simulated board's controllers serve it under (with a device only): a class
  // name, or "custom" with both targets; empty: the scheduler's default class.
  std::string slo;
  double ttft_target_s = 0, tpot_target_s = 0;
};

// What the simulated board did for a request (device time, not this host's).
struct DeviceOutcome {
  std::string slo;
  double ttft_s = 0, tpot_s = 0, e2e_s = 0, energy_j = 0;
  double ttft_target_s = 0, tpot_target_s = 0;
  int64_t predicted_output = 0;  // the output length its controller planned for
  int64_t switches = 0;          // clock changes while it was in the batch
  bool met = false, feasible = true;
  std::map<double, int64_t> mhz_layers;      // layers run at each clock (MHz)
  std::optional<dvfs::Measured> measured;    // backend linux: what the real board measured
  std::string mode;                          // with --modes: the board's power mode
  std::vector<std::vector<float>> timeline;  // MHz per layer, one row per pass (batch_cosim.h)
};

// What happens to a request, in order: tokens, then exactly one Done.
struct GenEvent {
  enum class Kind { Token, Done } kind = Kind::Token;
  int32_t token = -1;
  std::string text;  // the token's text
};

struct GenResult {
  std::vector<int32_t> tokens;
  StopReason stop = StopReason::Limit;
  // The mixture the output is generated with (until a re-routing): the prompt's, or with
  // prompt parts (SchedulerOptions::prompt_part) the last part's.
  std::vector<std::pair<std::string, double>> weights;
  // Prompt parts: where each begins (prompt tokens, BOS at 0) and the mixture it ran with.
  struct Part {
    int64_t from = 0;
    std::vector<std::pair<std::string, double>> weights;
  };
  std::vector<Part> prompt_parts;
  // Re-routings of the stream (SchedulerOptions::reroute_every): after how many generated
  // tokens, and the mixture from then on.
  struct Reroute {
    int64_t after = 0;
    std::vector<std::pair<std::string, double>> weights;
  };
  std::vector<Reroute> reroutes;
  double queue_s = 0, route_s = 0, ttft_s = 0, tpot_s = 0, e2e_s = 0;  // wall clock
  int64_t prompt_tokens = 0;
  std::optional<DeviceOutcome> device;  // with a simulated board
  int64_t predicted_tokens = 0;         // by the length predictor (0: none loaded)
};

// A request in flight: the scheduler pushes events, the HTTP side pops them.
class Ticket {
 public:
  // Blocks until an event is there (or the timeout passes: nullopt).
  std::optional<GenEvent> next(double timeout_s);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  const GenResult& result() const { return result_; }  // valid after Done

 private:
  friend class Scheduler;
  void push(GenEvent e);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenEvent> events_;
  std::atomic<bool> cancelled_{false};
  GenResult result_;
};

// What routes a prompt part (SchedulerOptions::prompt_part).
enum class PartRouter {
  Hidden,  // the router's own embedding of BOS and the part
  // The experts' TF-IDF keys (ExpertKey::tfidf_key), the part leaving the whole prompt's
  // mixture only where the router's own embedding gives it the same top expert (two
  // embeddings that err apart)
  TfIdfChecked,
  // Naive Bayes over the experts' training text (ExpertKey::unigram_logp, UnigramEmbedder):
  // no model pass, and on the shipped bank the best of the three on every held-out set
  Unigram,
};
PartRouter part_router_from_name(const std::string& s);  // "hidden", "tfidf-checked", "unigram"

struct SchedulerOptions {
  int slots = 4;
  int64_t n_ctx = 1024;    // per request: prompt and output together
  int64_t max_rows = 256;  // tokens per pass
  size_t max_queue = 64;   // waiting requests beyond the slots
  int threads = 0;
  RouterOptions router;
  // Routed requests re-routed every this many generated tokens (0: once, on the prompt, as
  // the paper): the router embeds BOS and the last reroute_window tokens of prompt and output
  // and the slot's experts change from the next token on (route eval --segment measures it).
  int64_t reroute_every = 0;
  int64_t reroute_window = 32;
  // Routed prompts longer than this many tokens are prefilled in parts of this many, each
  // under its own mixture (the slot's experts change at each part's first position,
  // Batch::set_loras_from, so the parts share passes as the row budget allows): the router's
  // weights for BOS and the part's own tokens (embedded as a prompt is), blended with the whole
  // prompt's, prompt_part_blend x the part's + (1 - prompt_part_blend) x the prompt's; the output
  // continues under the last part's (0: one mixture for the whole prompt, as the paper; `route eval
  // --segment-route own` measures it).
  int64_t prompt_part = 0;
  double prompt_part_blend = 1.0;
  // What routes each prompt part (`route eval --segment-embedder` measures each).
  PartRouter prompt_part_router = PartRouter::Hidden;
  // The unigram part router's softmax temperature over mean log-likelihoods per token (chosen
  // on the validation split: docs/results/route/parts-unigram-*-valid.md).
  double prompt_part_temperature = unigram_part_temperature;
  // A simulated board under a DVFS controller acting at every layer boundary of every pass
  // (dvfs/batch_cosim.h): device, controller, policy_path, corunner, corunner_seed are
  // used; empty device: none.
  dvfs::CoSimOptions board;
  std::string default_slo = "chatbot";  // for requests that name none (with a board)
  // The output-length predictor (serve/length.h) the board's controllers plan with; empty:
  // they plan for the output budget.
  std::string length_model;
};

class Scheduler {
 public:
  // experts: adapters with router keys (all made with one embedder), by name.
  Scheduler(std::shared_ptr<const Model> model,
            std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> experts,
            std::vector<ExpertKey> keys, const SchedulerOptions& o);
  ~Scheduler();

  const Tokenizer& tokenizer() const { return tok_; }
  const SchedulerOptions& options() const { return o_; }
  // The simulated board (nullptr without one); read it only from on_pass.
  const dvfs::BatchCoSim* board() const { return board_.get(); }
  std::vector<std::string> expert_names() const;
  // Queues a request; throws cln::Error naming what is wrong (prompt too long, unknown
  // expert) and returns nullptr when the queue is full or the scheduler is draining.
  std::shared_ptr<Ticket> submit(GenRequest r);
  // Stops taking requests, finishes those admitted or queued, then the loop ends.
  void drain();
  bool draining() const;
  bool idle() const;
  int active() const { return active_.load(); }
  size_t queued() const;
  // Called after every pass with the rows it ran (for metrics).
  std::function<void(int64_t rows, double seconds)> on_pass;

 private:
  struct Live;
  void loop();
  void admit(std::shared_ptr<Live> l);
  // The mixture for r; `embedding` is the prompt's (used when the router chooses).
  std::vector<std::pair<std::string, double>> route(const GenRequest& r,
                                                    std::span<const float> embedding);
  // The named mixture of the router's weights (experts under weight 0 left out).
  std::vector<std::pair<std::string, double>> named(const std::vector<double>& w) const;
  // Splits l's routed prompt into parts, each with its mixture (prompt_part); `embedding`
  // is the whole prompt's. Returns the token count each part's embedding ran on.
  std::vector<int64_t> route_parts(Live& l, std::span<const float> embedding);
  std::vector<ActiveLora> adapters(const std::vector<std::pair<std::string, double>>& mix) const;
  // Routes l's stream again on its recent context (reroute_every).
  void reroute(Live& l);

  std::shared_ptr<const Model> model_;
  Tokenizer tok_;
  std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> experts_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Embedder> embedder_;
  // The prompt parts' router and embedding where it is not the router's own.
  std::unique_ptr<Router> part_router_;
  std::unique_ptr<Embedder> part_embedder_;
  SchedulerOptions o_;
  std::unique_ptr<Batch> batch_;
  std::unique_ptr<dvfs::BatchCoSim> board_;
  int64_t next_id_ = 0;
  int embedder_layers_ = 0;  // layers the router's embedding runs (hidden:k)
  std::unique_ptr<OutputLengthModel> length_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Live>> queue_;
  std::vector<std::shared_ptr<Live>> live_;
  std::atomic<int> active_{0};
  bool draining_ = false, done_ = false;
  std::thread thread_;
};

}  // namespace cln::serve
