#include "clone/serve/scheduler.h"

#include <chrono>
#include <cmath>

#include "clone/core/error.h"
#include "clone/workload/workload.h"

namespace cln::serve {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

std::optional<GenEvent> Ticket::next(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                    [&] { return !events_.empty(); }))
    return std::nullopt;
  GenEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void Ticket::push(GenEvent e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

struct Scheduler::Live {
  std::shared_ptr<Ticket> ticket;
  GenRequest req;
  Sampler sampler;
  int slot = -1;
  int64_t id = -1;    // on the simulated board
  size_t fed = 0;     // prompt tokens already run
  int32_t next = -1;  // the token to run in the next pass (decode)
  bool done = false;  // stopped by EOS, its limit or a full context
  Clock::time_point submitted, admitted, first, last;
  Live(std::shared_ptr<Ticket> t, GenRequest r)
      : ticket(std::move(t)), req(std::move(r)), sampler(req.sampling), submitted(Clock::now()) {}
};

PartRouter part_router_from_name(const std::string& s) {
  if (s == "hidden") return PartRouter::Hidden;
  if (s == "tfidf-checked") return PartRouter::TfIdfChecked;
  if (s == "unigram") return PartRouter::Unigram;
  fail("unknown prompt-part router '", s, "' (hidden, tfidf-checked, unigram)");
}

Scheduler::Scheduler(
    std::shared_ptr<const Model> model,
    std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> experts,
    std::vector<ExpertKey> keys, const SchedulerOptions& o)
    : model_(std::move(model)),
      tok_(Tokenizer::from_gguf(model_->gguf())),
      experts_(std::move(experts)),
      o_(o) {
  if (o_.slots < 1) fail("serve: at least one slot");
  if (o_.reroute_every < 0 || o_.reroute_window < 1)
    fail("serve: re-routing every ", o_.reroute_every, " tokens on a window of ", o_.reroute_window,
         " (every >= 0, window >= 1)");
  if (o_.prompt_part < 0 || !(o_.prompt_part_blend >= 0 && o_.prompt_part_blend <= 1))
    fail("serve: prompt parts of ", o_.prompt_part, " tokens blended by ", o_.prompt_part_blend,
         " (parts >= 0, blend in [0, 1])");
  if (!keys.empty()) {
    if (keys.size() != experts_.size()) fail("serve: every expert needs a router key");
    router_ = std::make_unique<Router>(keys, o_.router);
    embedder_ = make_hidden_embedder(router_->embedder(), model_, std::max(1, o_.threads));
    embedder_layers_ = static_cast<int>(dynamic_cast<const HiddenEmbedder&>(*embedder_).layers());
  }
  if (o_.prompt_part_router != PartRouter::Hidden) {
    if (o_.prompt_part <= 0 || !router_)
      fail("serve: a prompt-part router needs prompt parts and experts with router keys");
    RouterOptions part_o = o_.router;
    part_o.centre = false;  // as `route eval` judged it
    if (o_.prompt_part_router == PartRouter::TfIdfChecked) {
      part_router_ = std::make_unique<Router>(tfidf_router_keys(keys), part_o);
      part_embedder_ = std::make_unique<TfIdfEmbedder>(keys.front().tfidf_idf);
    } else {
      if (!(o_.prompt_part_temperature > 0))
        fail("serve: the prompt parts' temperature must be positive");
      part_o.temperature = o_.prompt_part_temperature;
      for (size_t i = 0; i < keys.size(); ++i)
        if (keys[i].unigram_logp.empty())
          fail("serve: expert ", experts_[i].first,
               " has no unigram router key for the prompt parts (`clone lora keys --unigram` "
               "writes it; --prompt-part 0 routes whole prompts)");
      part_router_ = std::make_unique<Router>(unigram_router_keys(keys), part_o);
      part_embedder_ = std::make_unique<UnigramEmbedder>(tok_.n_vocab(), tok_.bos());
    }
    if (part_embedder_->dim() != tok_.n_vocab() ||
        static_cast<int64_t>(part_router_->key_size()) != tok_.n_vocab())
      fail("serve: the experts' ", part_embedder_->name(), " keys span ", part_router_->key_size(),
           " tokens, the model's vocabulary ", tok_.n_vocab());
  }
  batch_ =
      std::make_unique<Batch>(model_, BatchParams{o_.slots, o_.n_ctx, o_.max_rows, o_.threads});
  if (!o_.length_model.empty())
    length_ = std::make_unique<OutputLengthModel>(
        OutputLengthModel::load(o_.length_model, model_, std::max(1, o_.threads)));
  if (!o_.board.device.empty()) {
    o_.board.n_batch = o_.max_rows;
    (void)workload::slo_class(o_.default_slo);  // an unknown class fails here
    board_ = std::make_unique<dvfs::BatchCoSim>(model_->config(), o_.board);
    batch_->set_hook(board_->hook());
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  drain();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> Scheduler::expert_names() const {
  std::vector<std::string> n;
  for (const auto& e : experts_) n.push_back(e.first);
  return n;
}

std::shared_ptr<Ticket> Scheduler::submit(GenRequest r) {
  if (r.prompt.empty()) fail("the prompt is empty");
  if (static_cast<int64_t>(r.prompt.size()) + 1 > o_.n_ctx)
    fail("the prompt is ", r.prompt.size(), " tokens; the context holds ", o_.n_ctx);
  if (r.max_tokens < 0) fail("max_tokens must be >= 0");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= tok_.n_vocab()) fail("token id ", t, " is outside the vocabulary");
  if (r.experts.mode == ExpertChoice::Mode::Router && !router_)
    fail("no experts with router keys are loaded: name the experts or ask for none");
  for (const auto& [name, w] : r.experts.weights) {
    bool known = false;
    for (const auto& e : experts_) known |= e.first == name;
    if (!known) fail("unknown expert '", name, "'");
    if (!std::isfinite(w)) fail("the weight of expert '", name, "' is not finite");
  }
  (void)Sampler(r.sampling);  // checks temperature, top-k, top-p
  if (!r.slo.empty() && r.slo != "custom") (void)workload::slo_class(r.slo);
  if (r.slo == "custom" && (!(r.ttft_target_s > 0) || !(r.tpot_target_s > 0)))
    fail("a custom SLO needs both a TTFT and a TPOT target");
  auto t = std::make_shared<Ticket>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || queue_.size() >= o_.max_queue) return nullptr;
    queue_.push_back(std::make_shared<Live>(t, std::move(r)));
  }
  cv_.notify_all();
  return t;
}

void Scheduler::drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  cv_.notify_all();
}

bool Scheduler::draining() const {
  std::lock_guard<std::mutex> lock(mu_);
  return draining_;
}

bool Scheduler::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && live_.empty();
}

size_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::vector<std::pair<std::string, double>> Scheduler::route(const GenRequest& r,
                                                             std::span<const float> embedding) {
  std::vector<std::pair<std::string, double>> mix;
  switch (r.experts.mode) {
    case ExpertChoice::Mode::None:
      break;
    case ExpertChoice::Mode::Named:
      for (const auto& [name, w] : r.experts.weights)
        mix.emplace_back(name, 1.0 / static_cast<double>(r.experts.weights.size()));
      break;
    case ExpertChoice::Mode::Weights:
      mix = r.experts.weights;
      break;
    case ExpertChoice::Mode::Router:
      mix = named(router_->weights(embedding));
      break;
  }
  return mix;
}

std::vector<std::pair<std::string, double>> Scheduler::named(const std::vector<double>& w) const {
  std::vector<std::pair<std::string, double>> mix;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0) mix.emplace_back(experts_[i].first, w[i]);
  return mix;
}

std::vector<int64_t> Scheduler::route_parts(Live& l, std::span<const float> embedding) {
  GenResult& res = l.ticket->result_;
  const auto& p = l.req.prompt;
  const auto n = static_cast<int64_t>(p.size());
  // (No embedding: unigram parts at blend 1, which give the whole prompt's weights no share.)
  const std::vector<double> whole =
      embedding.empty() ? std::vector<double>(experts_.size(), 0.0) : router_->weights(embedding);
  std::vector<int64_t> embedded;
  for (int64_t start = 0; start < n; start += o_.prompt_part) {
    const auto window = segment_window_tokens(p, start, std::min(n, start + o_.prompt_part),
                                              SegmentRoute::Own, 1, tok_.bos());
    // A part's own router: the hidden one, or TF-IDF / unigram keys (part_router_).
    const std::vector<double> own = part_router_
                                        ? part_router_->weights(part_embedder_->embed(window))
                                        : router_->weights(embedder_->embed(window));
    // TF-IDF parts move only where the hidden router names the same top expert.
    const bool move = o_.prompt_part_router != PartRouter::TfIdfChecked ||
                      same_top_expert({own}, {router_->weights(embedder_->embed(window))}).front();
    const std::vector<double> w = move ? blend_weights(own, whole, o_.prompt_part_blend) : whole;
    res.prompt_parts.push_back({start, named(w)});
    if (o_.prompt_part_router != PartRouter::Unigram)
      embedded.push_back(std::min(static_cast<int64_t>(window.size()), embedder_->max_tokens()));
  }
  res.weights = res.prompt_parts.back().weights;  // the output continues the last part
  return embedded;
}

std::vector<ActiveLora> Scheduler::adapters(
    const std::vector<std::pair<std::string, double>>& mix) const {
  std::vector<ActiveLora> loras;
  for (const auto& [name, w] : mix)
    for (const auto& e : experts_)
      if (e.first == name) loras.push_back({e.second, static_cast<float>(w)});
  return loras;
}

void Scheduler::reroute(Live& l) {
  GenResult& res = l.ticket->result_;
  const auto t0 = Clock::now();
  std::vector<int32_t> window = {tok_.bos()};
  const auto& p = l.req.prompt;
  const auto& g = res.tokens;
  const auto want = static_cast<size_t>(o_.reroute_window);
  const size_t from_out = std::min(want, g.size());
  // Prompt tokens after its BOS, then the output's, the last `want` of them in all.
  const size_t from_prompt = std::min(want - from_out, p.size() > 0 ? p.size() - 1 : 0);
  window.insert(window.end(), p.end() - static_cast<std::ptrdiff_t>(from_prompt), p.end());
  window.insert(window.end(), g.end() - static_cast<std::ptrdiff_t>(from_out), g.end());
  const std::vector<float> emb = embedder_->embed(window);
  GenResult::Reroute r{static_cast<int64_t>(g.size()), route(l.req, emb)};
  batch_->set_loras(l.slot, adapters(r.weights));
  res.reroutes.push_back(std::move(r));
  res.route_s += seconds(t0, Clock::now());
  if (board_)
    board_->charge_embedding(
        l.id, embedder_layers_,
        std::min(static_cast<int64_t>(window.size()), embedder_->max_tokens()));
}

void Scheduler::admit(std::shared_ptr<Live> l) {
  l->admitted = Clock::now();
  GenResult& res = l->ticket->result_;
  res.prompt_tokens = static_cast<int64_t>(l->req.prompt.size());
  res.queue_s = seconds(l->submitted, l->admitted);
  // The prompt's embedding, once, for the router and for a length predictor on the same one;
  // not where unigram parts at blend 1 decide every position's mixture and no predictor reads
  // it (the whole prompt's weights would not be used).
  const bool routed = l->req.experts.mode == ExpertChoice::Mode::Router;
  const bool shared = embedder_ && length_ && length_->embedder_name() == embedder_->name();
  const bool in_parts =
      routed && o_.prompt_part > 0 && static_cast<int64_t>(l->req.prompt.size()) > o_.prompt_part;
  const bool whole_unused =
      in_parts && o_.prompt_part_router == PartRouter::Unigram && o_.prompt_part_blend == 1.0;
  std::vector<float> emb;
  if ((routed && !whole_unused) || shared) emb = embedder_->embed(l->req.prompt);
  if (!whole_unused) res.weights = route(l->req, emb);
  std::vector<int64_t> part_embedded;  // tokens each prompt part's embedding ran on
  if (in_parts) part_embedded = route_parts(*l, emb);
  if (routed) res.route_s = seconds(l->admitted, Clock::now());
  const int64_t budget =
      std::min(l->req.max_tokens, o_.n_ctx - static_cast<int64_t>(l->req.prompt.size()));
  if (length_)
    res.predicted_tokens = std::clamp<int64_t>(
        shared ? length_->predict(l->req.prompt, emb) : length_->predict(l->req.prompt), 1,
        std::max<int64_t>(1, budget));
  l->slot = batch_->open(
      adapters(res.prompt_parts.empty() ? res.weights : res.prompt_parts.front().weights));
  if (l->slot < 0) fail("serve: no free slot (internal)");
  // Each later part's mixture from its first position on, whichever pass its rows come in.
  for (size_t k = 1; k < res.prompt_parts.size(); ++k)
    batch_->set_loras_from(l->slot, res.prompt_parts[k].from,
                           adapters(res.prompt_parts[k].weights));
  if (board_) {
    GenRequest& q = l->req;
    workload::Request w;
    w.prompt = static_cast<int64_t>(q.prompt.size());  // first: the class's TTFT target grows
                                                       // with the prompt
    if (q.slo.empty()) q.slo = o_.default_slo;
    if (q.slo == "custom")
      w.ttft_target_s = q.ttft_target_s, w.tpot_target_s = q.tpot_target_s;
    else
      workload::apply_slo(w, workload::slo_class(q.slo));
    // The controllers plan for the predicted length, or without a predictor the budget.
    const int64_t planned =
        res.predicted_tokens > 0 ? res.predicted_tokens : std::max<int64_t>(1, budget);
    l->id = next_id_++;
    board_->admit(l->id, q.slo, w.prompt, planned, w.ttft_target_s, w.tpot_target_s);
    // The router's embedding ran before the request's passes: on the board too.
    if (q.experts.mode == ExpertChoice::Mode::Router && !emb.empty())
      board_->charge_embedding(l->id, embedder_layers_,
                               std::min(w.prompt, embedder_->max_tokens()));
    for (int64_t n : part_embedded) board_->charge_embedding(l->id, embedder_layers_, n);
  }
  ++active_;
  live_.push_back(std::move(l));
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Live>> finished;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || !live_.empty() || draining_; });
      if (draining_ && queue_.empty() && live_.empty()) break;
    }
    // Finish cancelled requests at once: their slots take new work in this pass.
    for (size_t i = 0; i < live_.size();) {
      if (live_[i]->ticket->cancelled()) {
        live_[i]->ticket->result_.stop = StopReason::Caller;
        finished.push_back(live_[i]);
        batch_->close(live_[i]->slot);
        --active_;
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    while (static_cast<int>(live_.size()) < o_.slots) {
      std::shared_ptr<Live> l;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty()) break;
        l = queue_.front();
        queue_.pop_front();
      }
      if (l->ticket->cancelled() || l->req.max_tokens == 0) {
        l->ticket->result_.stop = l->ticket->cancelled() ? StopReason::Caller : StopReason::Limit;
        finished.push_back(l);
        continue;
      }
      admit(std::move(l));
    }
    // One pass: each request's next prompt chunk or its last token, within the row budget.
    std::vector<Batch::Work> work;
    std::vector<Live*> who;
    std::vector<dvfs::BatchItem> items;  // the same work, as the simulated board sees it
    int64_t budget = o_.max_rows;
    for (const auto& l : live_) {
      if (budget == 0) break;
      if (l->fed < l->req.prompt.size()) {
        // (Prompt parts change the slot's experts at their first positions: set at admission.)
        const auto n =
            std::min<int64_t>(budget, static_cast<int64_t>(l->req.prompt.size() - l->fed));
        work.push_back(
            {l->slot,
             std::span<const int32_t>(l->req.prompt).subspan(l->fed, static_cast<size_t>(n))});
        items.push_back({l->id, Phase::Prefill, batch_->n_past(l->slot), n});
        l->fed += static_cast<size_t>(n);
        budget -= n;
      } else {
        work.push_back({l->slot, std::span<const int32_t>(&l->next, 1)});
        items.push_back({l->id, Phase::Decode, batch_->n_past(l->slot), 1});
        budget -= 1;
      }
      who.push_back(l.get());
    }
    if (!work.empty()) {
      if (board_) board_->begin_pass(std::move(items));
      const auto t0 = Clock::now();
      const auto logits = batch_->step(work);
      if (on_pass) {
        int64_t rows = 0;
        for (const auto& w : work) rows += static_cast<int64_t>(w.tokens.size());
        on_pass(rows, seconds(t0, Clock::now()));
      }
      for (size_t i = 0; i < who.size(); ++i) {
        Live& l = *who[i];
        if (l.fed < l.req.prompt.size()) continue;  // prompt not done: nothing to sample
        GenResult& res = l.ticket->result_;
        const auto now = Clock::now();
        const int32_t t = l.sampler.sample(logits[i]);
        bool done = false;
        if (t == tok_.eos() && !l.req.ignore_eos) {
          res.stop = StopReason::Eos, done = true;
        } else {
          if (res.tokens.empty()) l.first = now;
          l.last = now;
          res.tokens.push_back(t);
          l.ticket->push({GenEvent::Kind::Token, t, tok_.token_to_piece(t)});
          if (static_cast<int64_t>(res.tokens.size()) >= l.req.max_tokens)
            res.stop = StopReason::Limit, done = true;
          else if (batch_->n_past(l.slot) >= o_.n_ctx)
            res.stop = StopReason::ContextFull, done = true;
          l.next = t;
        }
        l.done = done;
        if (!done && o_.reroute_every > 0 && l.req.experts.mode == ExpertChoice::Mode::Router &&
            static_cast<int64_t>(res.tokens.size()) % o_.reroute_every == 0)
          reroute(l);
      }
    }
    // Requests that finished this pass (marked cancelled above with their own reason).
    for (size_t i = 0; i < live_.size();) {
      Live& l = *live_[i];
      if (l.done) {
        finished.push_back(live_[i]);
        batch_->close(l.slot);
        --active_;
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    for (const auto& l : finished) {
      GenResult& res = l->ticket->result_;
      const auto end = Clock::now();
      res.e2e_s = seconds(l->submitted, end);
      if (!res.tokens.empty()) {
        res.ttft_s = seconds(l->submitted, l->first);
        res.tpot_s = res.tokens.size() > 1
                         ? seconds(l->first, l->last) / static_cast<double>(res.tokens.size() - 1)
                         : 0.0;
      }
      if (board_ && l->id >= 0) {
        const dvfs::BatchRequestResult b = board_->finish(l->id);
        DeviceOutcome d;
        d.slo = l->req.slo;
        d.ttft_s = b.r.ttft_s, d.tpot_s = b.r.tpot_s, d.e2e_s = b.r.e2e_s;
        d.energy_j = b.r.energy_j;
        d.ttft_target_s = b.r.ttft_target_s, d.tpot_target_s = b.r.tpot_target_s;
        d.predicted_output = b.r.predicted;
        d.switches = b.r.switches;
        d.met = b.r.met, d.feasible = b.r.feasible;
        d.mhz_layers = b.mhz_layers;
        d.measured = b.measured;
        d.timeline = b.timeline;
        d.mode = b.mode;
        res.device = std::move(d);
      }
      l->ticket->push({GenEvent::Kind::Done, -1, ""});
    }
  }
}

}  // namespace cln::serve
