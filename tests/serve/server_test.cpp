// The OpenAI-compatible server, in process, on the shipped base model and experts: what
// it returns equals the library's generate() with the same experts (one request, and
// several at once in the batch with different mixtures), streaming equals non-streaming,
// stop strings cut, bad requests get 4xx naming the problem, a full queue 503, a client
// that leaves frees its slot, stop() drains, and /metrics counts what was served.
#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "clone/core/error.h"
#include "clone/dvfs/cosim.h"
#include "clone/engine/generate.h"
#include "clone/gguf/gguf.h"
#include "clone/serve/embed.h"
#include "clone/serve/load.h"
#include "clone/serve/server.h"
#include "device/fake_sysfs.h"

using namespace cln;
using nlohmann::json;

namespace {

const std::string kBase = std::string(CLONE_SOURCE_DIR) + "/models/base/model.gguf";
std::string expert_path(const std::string& n) {
  return std::string(CLONE_SOURCE_DIR) + "/models/experts/" + n + ".gguf";
}

std::shared_ptr<const Model> base() {
  static auto m = Model::load(kBase);
  return m;
}

using Experts = std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>>;
Experts experts() {
  static Experts e = [] {
    Experts x;
    for (const char* n : {"quotes", "code", "scripture"})
      x.emplace_back(n, LoraAdapter::load(expert_path(n), *base()));
    return x;
  }();
  return e;
}

// What the library gives alone: greedy, the named experts at the given weights.
std::string alone(const std::string& prompt, int64_t max_new,
                  const std::vector<std::pair<std::string, float>>& mix,
                  int64_t* n_tokens = nullptr) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  Context ctx(base(), {256, 1, 256});
  std::vector<ActiveLora> l;
  for (const auto& [name, w] : mix)
    for (const auto& e : experts())
      if (e.first == name) l.push_back({e.second, w});
  ctx.set_loras(l);
  GenerateParams p;
  p.max_new = max_new;
  p.sampling.temperature = 0;
  p.eos = tok.eos();
  const Generation g = generate(ctx, tok.encode(prompt, true), p);
  if (n_tokens) *n_tokens = static_cast<int64_t>(g.tokens.size());
  std::string s;
  for (int32_t t : g.tokens) s += tok.token_to_piece(t);
  return s;
}

// Keys for the quotes, code and scripture experts made from one prompt each, so a prompt
// equal to one of them routes to it.
// One prompt per expert (quotes, code, scripture): what the tests' keys are made from.
constexpr const char* kKeyPrompts[] = {"He that loveth not knoweth not God; for God is love.",
                                       "for (int i = 0; i < n; ++i) sum += a[i];",
                                       "And the LORD spake unto Moses, saying"};

// The load generator on a server in this process, no warm-up: each client sends two requests
// one after the other (a time limit of a minute only stops a server that hangs), so what is
// counted does not depend on how fast this machine is.
serve::LoadOptions two_request_load(int port, int clients, int64_t min_tokens, int64_t max_tokens) {
  serve::LoadOptions lo;
  lo.port = port;
  lo.clients = clients;
  lo.seconds = 60.0;
  lo.requests_per_client = 2;
  lo.warmup_s = 0;
  lo.min_tokens = min_tokens, lo.max_tokens = max_tokens;
  return lo;
}

std::vector<serve::ExpertKey> one_prompt_keys(const Tokenizer& tok, serve::Embedder& emb) {
  std::vector<serve::ExpertKey> keys;
  for (const char* k : kKeyPrompts) {
    const auto e = emb.embed(tok.encode(k, true));
    keys.push_back({emb.name(), std::vector<float>(e.begin(), e.end()), 1});
  }
  return keys;
}

// A scheduler and a server on a free port, serving on a thread until the end of the test.
struct Running {
  serve::Scheduler sched;
  serve::Server server;
  std::thread thread;
  int port;
  explicit Running(serve::SchedulerOptions so, serve::ServerOptions ho = {},
                   std::vector<serve::ExpertKey> keys = {})
      : sched(base(), experts(), std::move(keys), so), server(sched, [&] {
          ho.port = 0;
          ho.http_threads = 8;
          return ho;
        }()) {
    port = server.bind();
    thread = std::thread([this] { server.run(); });
  }
  ~Running() {
    server.stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body) const {
    return client().Post(path.c_str(), body.dump(), "application/json");
  }
};

serve::SchedulerOptions opts(int slots = 3) {
  serve::SchedulerOptions o;
  o.slots = slots;
  o.n_ctx = 256;
  o.threads = 1;
  return o;
}

json completion(const std::string& prompt, int64_t max_tokens, json experts) {
  return {{"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"clone", {{"experts", experts}}}};
}

// A routed greedy completion of n_new tokens (EOS ignored) whose text must be `want`; its
// response (an error's on failure, which the caller's checks then fail on).
json routed_completion(const Running& r, const std::string& prompt, int64_t n_new,
                       const std::string& want) {
  json body = completion(prompt, n_new, "auto");
  body["clone"]["ignore_eos"] = true;
  auto res = r.post("/v1/completions", body);
  if (!res) return json::object();
  EXPECT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  if (res->status == 200) {
    EXPECT_EQ(j["choices"][0]["text"].get<std::string>(), want);
  }
  return j;
}

// The text of a Server-Sent Events body, and the parsed chunks.
std::vector<json> sse_chunks(const std::string& body, bool* done) {
  std::vector<json> out;
  *done = false;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line";
    if (end == std::string::npos) break;
    const std::string ev = body.substr(at, end - at);
    at = end + 2;
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    const std::string data = ev.substr(6);
    if (data == "[DONE]") {
      *done = true;
      EXPECT_EQ(at, body.size()) << "events after [DONE]";
      break;
    }
    out.push_back(json::parse(data));
  }
  return out;
}

double metric(const std::string& text, const std::string& line_start) {
  const size_t at = text.find("\n" + line_start + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + line_start.size() + 2));
}

}  // namespace

TEST(Server, CompletionEqualsGenerateWithTheNamedExperts) {
  Running r(opts());
  const std::string prompt = "The meaning of life is";
  int64_t n = 0;
  const std::string want = alone(prompt, 24, {{"quotes", 0.5f}, {"code", 0.5f}}, &n);
  auto res = r.post("/v1/completions", completion(prompt, 24, {"quotes", "code"}));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], n == 24 ? "length" : "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], n);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);  // BOS and five pieces, as `clone tokenize` gives
  EXPECT_EQ(j["clone"]["experts"], (json{{"quotes", 0.5}, {"code", 0.5}}));
  EXPECT_GT(j["clone"]["timings_ms"]["ttft"].get<double>(), 0);
  // Explicit weights, and none.
  res = r.post("/v1/completions", completion(prompt, 12, {{"scripture", 0.8}, {"code", -0.3}}));
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"],
            alone(prompt, 12, {{"scripture", 0.8f}, {"code", -0.3f}}));
  res = r.post("/v1/completions", completion(prompt, 12, "none"));
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], alone(prompt, 12, {}));
  EXPECT_NE(alone(prompt, 12, {}), alone(prompt, 12, {{"scripture", 0.8f}, {"code", -0.3f}}));
}

TEST(Server, ConcurrentRequestsInOneBatchEqualEachAlone) {
  Running r(opts(3));
  struct Case {
    std::string prompt;
    json experts;
    std::vector<std::pair<std::string, float>> mix;
  };
  // Five requests for three slots: two wait in the queue; mixtures all differ.
  const std::vector<Case> cases = {
      {"In the beginning God created", {"scripture"}, {{"scripture", 1}}},
      {"#include <stdio.h>\nint main(",
       {{"code", 1.0}, {"quotes", 0.25}},
       {{"code", 1}, {"quotes", 0.25f}}},
      {"A fool and his money", "none", {}},
      {"The computer",
       {"quotes", "code", "scripture"},
       {{"quotes", 1 / 3.f}, {"code", 1 / 3.f}, {"scripture", 1 / 3.f}}},
      {"Love is", {{"quotes", 0.7}}, {{"quotes", 0.7f}}}};
  std::vector<std::string> got(cases.size());
  std::vector<std::thread> th;
  for (size_t i = 0; i < cases.size(); ++i)
    th.emplace_back([&, i] {
      auto res = r.post("/v1/completions", completion(cases[i].prompt, 20, cases[i].experts));
      if (res && res->status == 200) got[i] = json::parse(res->body)["choices"][0]["text"];
    });
  for (auto& t : th) t.join();
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(got[i], alone(cases[i].prompt, 20, cases[i].mix)) << cases[i].prompt;
}

TEST(Server, StreamingEqualsNonStreamingAndEndsWithDone) {
  Running r(opts());
  for (bool chat : {false, true}) {
    json body = completion("Once upon a time", 16, {"quotes"});
    if (chat) {
      body.erase("prompt");
      body["messages"] = {{{"role", "user"}, {"content", "Once upon a time"}}};
      body["max_tokens"] = 16;
    }
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    auto plain = r.post(path, body);
    ASSERT_EQ(plain->status, 200) << plain->body;
    const json p = json::parse(plain->body);
    const std::string want = chat ? p["choices"][0]["message"]["content"] : p["choices"][0]["text"];
    EXPECT_EQ(want, alone("Once upon a time", 16, {{"quotes", 1}}));
    body["stream"] = true;
    auto st = r.post(path, body);
    ASSERT_EQ(st->status, 200) << st->body;
    EXPECT_EQ(st->get_header_value("Content-Type"), "text/event-stream");
    bool done = false;
    const auto chunks = sse_chunks(st->body, &done);
    EXPECT_TRUE(done);
    ASSERT_GE(chunks.size(), 3u);
    std::string text;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const json& c = chunks[i]["choices"][0];
      EXPECT_EQ(chunks[i]["object"], chat ? "chat.completion.chunk" : "text_completion");
      const bool last = i + 1 == chunks.size();
      EXPECT_EQ(c["finish_reason"].is_null(), !last);
      EXPECT_EQ(chunks[i].contains("clone"), last);
      if (chat) {
        EXPECT_EQ(c["delta"].contains("role"), i == 0);
        if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      } else {
        text += c["text"].get<std::string>();
      }
    }
    EXPECT_EQ(text, want) << (chat ? "chat" : "completion");
  }
}

TEST(Server, StopStringsCutTheTextAndFinishWithStop) {
  Running r(opts());
  const std::string prompt = "In the beginning God created";
  const std::string full = alone(prompt, 30, {{"scripture", 1}});
  ASSERT_GT(full.size(), 12u);
  // A stop string from the middle of the output: the text before its first occurrence.
  const std::string stop = full.substr(8, 3);
  const std::string want = full.substr(0, full.find(stop));
  for (bool stream : {false, true}) {
    json body = completion(prompt, 30, {"scripture"});
    body["stop"] = {"never appears", stop};
    body["stream"] = stream;
    auto res = r.post("/v1/completions", body);
    ASSERT_EQ(res->status, 200) << res->body;
    std::string text, reason;
    if (stream) {
      bool done = false;
      for (const json& c : sse_chunks(res->body, &done)) {
        text += c["choices"][0]["text"].get<std::string>();
        if (!c["choices"][0]["finish_reason"].is_null()) reason = c["choices"][0]["finish_reason"];
      }
    } else {
      const json j = json::parse(res->body);
      text = j["choices"][0]["text"], reason = j["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, want) << "stream " << stream << ", stop '" << stop << "'";
    EXPECT_EQ(reason, "stop");
  }
}

TEST(Server, BadRequestsGet4xxNamingTheProblem) {
  serve::ServerOptions ho;
  ho.max_body = 4096;
  Running r(opts(), ho);
  auto cl = r.client();
  struct Case {
    std::string path, body, says;
    int status;
  };
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "word ";
  const std::vector<Case> cases = {
      {"/v1/completions", R"({"prompt": "x", )", "malformed JSON", 400},
      {"/v1/completions", R"([1, 2])", "JSON object", 400},
      {"/v1/completions", R"({"max_tokens": 3})", "'prompt'", 400},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "ten"})",
       "'max_tokens' must be an integer", 400},
      {"/v1/completions", R"({"prompt": "x", "temperature": 5})", "'temperature' must be in", 400},
      {"/v1/completions", R"({"prompt": "x", "stream": "yes"})", "'stream'", 400},
      {"/v1/completions", R"({"prompt": "x", "n": 2})", "'n'", 400},
      {"/v1/completions", R"({"prompt": "x", "stop": [1]})", "'stop'", 400},
      {"/v1/completions", R"({"prompt": "x", "clone": {"experts": ["nope"]}})",
       "unknown expert 'nope'", 400},
      {"/v1/completions", R"({"prompt": "x", "clone": {"experts": "auto"}})", "router keys", 400},
      {"/v1/completions", R"({"prompt": "x", "clone": {"expert": "code"}})",
       "unknown field 'clone.expert'", 400},
      {"/v1/completions", R"({"prompt": "x", "clone": {"slo": "fast"}})",
       "unknown SLO class 'fast'", 400},
      {"/v1/completions", R"({"prompt": "x", "clone": {"slo": {"ttft_ms": 100}}})", "tpot_ms", 400},
      {"/v1/completions", json{{"prompt", long_prompt}}.dump(), "the context holds 256", 400},
      {"/v1/chat/completions", R"({"messages": []})", "'messages' must be a non-empty list", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "hi"}]})",
       "unknown message role 'robot'", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user"}]})", "'content'", 400},
      {"/v1/completions", json{{"prompt", std::string(5000, 'a')}}.dump(),
       "larger than the server accepts", 413},
      {"/v1/nothing", "{}", "no such endpoint", 404},
  };
  for (const Case& c : cases) {
    auto res = cl.Post(c.path.c_str(), c.body, "application/json");
    ASSERT_TRUE(res) << c.body;
    EXPECT_EQ(res->status, c.status) << c.body << " -> " << res->body;
    const json j = json::parse(res->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << res->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.says), std::string::npos)
        << c.body << " -> " << res->body;
  }
  // The server still serves.
  auto ok = r.post("/v1/completions", completion("Hello", 4, "none"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Server, AFullQueueGets503) {
  serve::SchedulerOptions o = opts(1);
  o.max_queue = 1;
  Running r(o);
  // Hold the scheduler after its first pass so the slot stays taken and the queue full.
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, release = false;
  r.sched.on_pass = [&](int64_t, double) {
    std::unique_lock<std::mutex> lock(mu);
    held = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  std::thread a(
      [&] { EXPECT_EQ(r.post("/v1/completions", completion("One", 4, "none"))->status, 200); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  std::thread b(
      [&] { EXPECT_EQ(r.post("/v1/completions", completion("Two", 4, "none"))->status, 200); });
  while (r.sched.queued() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto c = r.post("/v1/completions", completion("Three", 4, "none"));
  EXPECT_EQ(c->status, 503) << c->body;
  EXPECT_NE(c->body.find("busy"), std::string::npos);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  a.join();
  b.join();
  r.sched.on_pass = nullptr;
}

TEST(Server, AClientThatLeavesMidStreamFreesItsSlot) {
  Running r(opts(1));
  json body = completion("Once", 240, "none");
  body["stream"] = true;
  body["clone"]["ignore_eos"] = true;
  int chunks = 0;
  auto cl = r.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;  // hang up after a few chunks
  };
  auto res = cl.send(req);
  EXPECT_FALSE(res);  // the client cancelled
  // The slot is free well before 240 tokens would have taken, and it counts as cancelled.
  const auto t0 = std::chrono::steady_clock::now();
  while (r.sched.active() > 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(r.sched.active(), 0);
  const std::string m = r.client().Get("/metrics")->body;
  EXPECT_EQ(metric(m, "clone_requests_total{outcome=\"cancelled\"}"), 1);
  EXPECT_LT(metric(m, "clone_passes_total"), 200) << "it ran on after the client left";
  // The one slot takes the next request.
  auto ok = r.post("/v1/completions", completion("Hello", 4, "none"));
  EXPECT_EQ(ok->status, 200);
}

TEST(Server, StopDrainsWhatWasAdmittedAndRefusesNewRequests) {
  auto r = std::make_unique<Running>(opts(1));
  json body = completion("Once", 120, "none");
  body["clone"]["ignore_eos"] = true;
  int first_status = 0;
  json first;
  std::thread a([&] {
    auto res = r->post("/v1/completions", body);
    if (!res) return;
    first_status = res->status;
    first = json::parse(res->body);
  });
  while (r->sched.active() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int port = r->port;
  std::thread stopper([&] { r->server.stop(); });
  while (!r->sched.draining()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  httplib::Client cl("127.0.0.1", port);
  auto late = cl.Post("/v1/completions", completion("Late", 4, "none").dump(), "application/json");
  if (late) {  // or refused once the listener closed
    EXPECT_EQ(late->status, 503) << late->body;
  }
  stopper.join();
  a.join();
  ASSERT_EQ(first_status, 200);
  EXPECT_EQ(first["usage"]["completion_tokens"], 120);
  r->thread.join();
  r->thread = std::thread([] {});
  r.reset();
}

TEST(Server, MetricsCountWhatWasServed) {
  Running r(opts());
  int64_t tokens = 0, prompt = 0;
  for (const char* p : {"Hello", "The old man", "int x ="}) {
    auto res = r.post("/v1/completions", completion(p, 7, {"code"}));
    ASSERT_EQ(res->status, 200);
    const json j = json::parse(res->body);
    tokens += j["usage"]["completion_tokens"].get<int64_t>();
    prompt += j["usage"]["prompt_tokens"].get<int64_t>();
  }
  r.post("/v1/completions", R"({"prompt": 3})");
  auto res = r.client().Get("/metrics");
  ASSERT_EQ(res->status, 200);
  const std::string& m = res->body;
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_EQ(metric(m, "clone_generated_tokens_total"), static_cast<double>(tokens));
  EXPECT_EQ(metric(m, "clone_prompt_tokens_total"), static_cast<double>(prompt));
  EXPECT_EQ(metric(m, "clone_requests_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(metric(m, "clone_requests_total{outcome=\"bad_request\"}"), 1);
  EXPECT_EQ(metric(m, "clone_ttft_seconds_count"), 3);
  EXPECT_EQ(metric(m, "clone_expert_weight_total{expert=\"code\"}"), 3);
  // Each pass runs a prompt or one token per request: prompt tokens plus all but each
  // request's last token (the last is sampled, not run).
  EXPECT_EQ(metric(m, "clone_batch_rows_sum"), static_cast<double>(prompt + tokens - 3));
  EXPECT_NE(m.find("# TYPE clone_ttft_seconds histogram"), std::string::npos);
}

TEST(Server, AutoRoutingUsesTheRoutersWeights) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  auto emb = serve::make_hidden_embedder("hidden:2", base(), 1);
  const std::vector<serve::ExpertKey> keys = one_prompt_keys(tok, *emb);
  serve::SchedulerOptions o = opts();
  Running r(o, {}, keys);
  const serve::Router router(keys, o.router);
  const std::string prompt = "int main() { return 0; }";
  const std::vector<double> want = router.weights(emb->embed(tok.encode(prompt, true)));
  auto res = r.post("/v1/completions", completion(prompt, 8, "auto"));
  ASSERT_EQ(res->status, 200) << res->body;
  const json w = json::parse(res->body)["clone"]["experts"];
  const char* names[] = {"quotes", "code", "scripture"};
  double sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double got = w.contains(names[i]) ? w[names[i]].get<double>() : 0.0;
    EXPECT_NEAR(got, want[i], 1e-9) << names[i];
    sum += got;
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_GT(w.value("code", 0.0), 0.5) << w.dump();  // the code key is the nearest
}

// Re-routing a stream (reroute_every): every 3 tokens the router embeds BOS and the last 8
// tokens of prompt and output, and from the next token on the slot runs that mixture; the
// server's tokens and re-routings equal a Context doing the same by hand.
TEST(Server, ReroutingAStreamEqualsSwitchingExpertsByHand) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  auto emb = serve::make_hidden_embedder("hidden:2", base(), 1);
  const std::vector<serve::ExpertKey> keys = one_prompt_keys(tok, *emb);
  serve::SchedulerOptions o = opts();
  o.router.temperature = 0.01;
  o.reroute_every = 3;
  o.reroute_window = 8;
  const std::string prompt = "And God said, int main() {";
  const int64_t n_new = 11;
  // By hand.
  const serve::Router router(keys, o.router);
  const auto mix_of = [&](std::span<const int32_t> t) {
    const auto w = router.weights(emb->embed(t));
    std::vector<ActiveLora> l;
    for (size_t i = 0; i < w.size(); ++i)
      if (w[i] > 0) l.push_back({experts()[i].second, static_cast<float>(w[i])});
    return std::make_pair(l, w);
  };
  const std::vector<int32_t> p = tok.encode(prompt, true);
  Context ctx(base(), {256, 1, 256});
  ctx.set_loras(mix_of(p).first);
  std::vector<int32_t> out;
  std::vector<std::vector<double>> want_w;
  auto l = ctx.eval(p);
  while (static_cast<int64_t>(out.size()) < n_new) {
    const auto t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    ASSERT_NE(t, tok.eos());
    out.push_back(t);
    if (static_cast<int64_t>(out.size()) == n_new) break;
    if (out.size() % 3 == 0) {
      std::vector<int32_t> all(p.begin() + 1, p.end());
      all.insert(all.end(), out.begin(), out.end());
      std::vector<int32_t> window = {tok.bos()};
      window.insert(window.end(), all.end() - 8, all.end());
      auto [mix, w] = mix_of(window);
      ctx.set_loras(mix);
      want_w.push_back(w);
    }
    const int32_t one[1] = {t};
    l = ctx.eval(one);
  }
  std::string want;
  for (int32_t t : out) want += tok.token_to_piece(t);

  Running r(o, {}, keys);
  const json j = routed_completion(r, prompt, n_new, want);
  const json& rr = j["clone"]["reroutes"];
  ASSERT_EQ(rr.size(), want_w.size());  // after 3, 6 and 9 tokens (not after the last)
  const char* names[] = {"quotes", "code", "scripture"};
  bool changed = false;
  for (size_t k = 0; k < rr.size(); ++k) {
    EXPECT_EQ(rr[k]["after_tokens"].get<int64_t>(), 3 * static_cast<int64_t>(k + 1));
    for (size_t i = 0; i < 3; ++i) {
      const json& e = rr[k]["experts"];
      EXPECT_NEAR(e.value(names[i], 0.0), want_w[k][i], 1e-9) << k << " " << names[i];
      changed |=
          std::fabs(e.value(names[i], 0.0) - j["clone"]["experts"].value(names[i], 0.0)) > 0.05;
    }
  }
  EXPECT_TRUE(changed) << j["clone"].dump();  // the stream was routed somewhere else
  serve::SchedulerOptions bad = o;
  bad.reroute_window = 0;
  EXPECT_THROW(serve::Scheduler(base(), experts(), keys, bad), Error);
}

TEST(Server, PromptPartsEqualSwitchingExpertsByHandWhileTheyPrefill) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  auto emb = serve::make_hidden_embedder("hidden:2", base(), 1);
  const std::vector<serve::ExpertKey> keys = one_prompt_keys(tok, *emb);
  serve::SchedulerOptions o = opts();
  o.router.temperature = 0.01;
  o.max_rows = 4;  // chunks shorter than a part too: a part's mixture holds over its chunks
  o.prompt_part = 7;
  o.prompt_part_blend = 0.75;
  const std::string prompt = "And the LORD spake unto Moses, saying: for (int i = 0; i < n; ++i)";
  const int64_t n_new = 24;
  // By hand: each part under 0.75 x its own weights + 0.25 x the whole prompt's.
  const serve::Router router(keys, o.router);
  const std::vector<int32_t> p = tok.encode(prompt, true);
  const auto n = static_cast<int64_t>(p.size());
  ASSERT_GT(n, 2 * o.prompt_part);  // three parts at least
  const std::vector<double> whole = router.weights(emb->embed(p));
  Context ctx(base(), {256, 1, 256});
  std::vector<std::vector<double>> want_w;
  std::vector<float> l;
  for (int64_t start = 0; start < n; start += o.prompt_part) {
    const int64_t end = std::min(n, start + o.prompt_part);
    std::vector<int32_t> own = {tok.bos()};
    if (start == 0) own.clear();
    own.insert(own.end(), p.begin() + start, p.begin() + end);
    const std::vector<double> w0 = router.weights(emb->embed(own));
    std::vector<double> w(w0.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.75 * w0[i] + 0.25 * whole[i];
    std::vector<ActiveLora> mix;
    for (size_t i = 0; i < w.size(); ++i)
      if (w[i] > 0) mix.push_back({experts()[i].second, static_cast<float>(w[i])});
    ctx.set_loras(mix);
    want_w.push_back(w);
    const auto got = ctx.eval(
        std::span(p).subspan(static_cast<size_t>(start), static_cast<size_t>(end - start)));
    l.assign(got.begin(), got.end());
  }
  std::string want;  // the output continues under the last part's mixture
  for (int64_t k = 0; k < n_new; ++k) {
    const auto t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    want += tok.token_to_piece(t);
    const int32_t one[1] = {t};
    const auto got = ctx.eval(one);
    l.assign(got.begin(), got.end());
  }

  Running r(o, {}, keys);
  const json j = routed_completion(r, prompt, n_new, want);
  const json& parts = j["clone"]["prompt_parts"];
  ASSERT_EQ(parts.size(), want_w.size());
  const char* names[] = {"quotes", "code", "scripture"};
  bool changed = false;
  for (size_t k = 0; k < parts.size(); ++k) {
    EXPECT_EQ(parts[k]["from_token"].get<int64_t>(), o.prompt_part * static_cast<int64_t>(k));
    for (size_t i = 0; i < 3; ++i) {
      const double got = parts[k]["experts"].value(names[i], 0.0);
      EXPECT_NEAR(got, want_w[k][i], 1e-9) << k << " " << names[i];
      changed |= std::fabs(got - parts[0]["experts"].value(names[i], 0.0)) > 0.05;
    }
  }
  EXPECT_TRUE(changed) << j["clone"].dump();  // the parts were routed apart
  for (size_t i = 0; i < 3; ++i)              // the output's mixture is the last part's
    EXPECT_NEAR(j["clone"]["experts"].value(names[i], 0.0), want_w.back()[i], 1e-9);
  // A prompt no longer than a part has one mixture, as without parts.
  auto short_res = r.post("/v1/completions", completion("int main() {", 2, "auto"));
  ASSERT_EQ(short_res->status, 200) << short_res->body;
  EXPECT_TRUE(json::parse(short_res->body)["clone"]["prompt_parts"].empty());
  serve::SchedulerOptions bad = o;
  bad.prompt_part_blend = 1.5;
  EXPECT_THROW(serve::Scheduler(base(), experts(), keys, bad), Error);
}

TEST(Server, CheckedPromptPartsMoveOnlyWhereBothRoutersNameTheSameExpert) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  auto emb = serve::make_hidden_embedder("hidden:2", base(), 1);
  std::vector<serve::ExpertKey> keys = one_prompt_keys(tok, *emb);
  // The TF-IDF halves: idf fitted on the three key prompts, each key its own prompt's.
  std::vector<std::vector<int32_t>> docs;
  for (const char* k : kKeyPrompts) docs.push_back(tok.encode(k, true));
  serve::TfIdfEmbedder tfidf(tok.n_vocab(), docs);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i].tfidf_idf = tfidf.idf(), keys[i].tfidf_key = tfidf.embed(docs[i]);
  serve::SchedulerOptions o = opts();
  o.router.temperature = 0.05;  // soft enough that the two routers' weights differ
  o.router.threshold = 0;
  o.prompt_part = 6;
  o.prompt_part_blend = 0.75;
  o.prompt_part_router = serve::PartRouter::TfIdfChecked;
  const std::string prompt =
      "And the LORD spake unto Moses, saying: he that loveth not knoweth not; sum += God; is "
      "love for (int i = 0; i < n; the LORD spake a[i] unto";
  // By hand: a part moves to 0.75 x its TF-IDF weights + 0.25 x the whole prompt's where
  // both routers give it the same top expert, and keeps the whole prompt's elsewhere.
  const serve::Router hidden_router(keys, o.router);
  serve::RouterOptions tf_o = o.router;
  tf_o.centre = false;
  const serve::Router tf_router(serve::tfidf_router_keys(keys), tf_o);
  const std::vector<int32_t> p = tok.encode(prompt, true);
  const auto n = static_cast<int64_t>(p.size());
  const std::vector<double> whole = hidden_router.weights(emb->embed(p));
  std::vector<std::vector<double>> want_w;
  int moved = 0, kept = 0;
  for (int64_t start = 0; start < n; start += o.prompt_part) {
    std::vector<int32_t> own = {tok.bos()};
    if (start == 0) own.clear();
    own.insert(own.end(), p.begin() + start, p.begin() + std::min(n, start + o.prompt_part));
    const std::vector<double> h = hidden_router.weights(emb->embed(own));
    const std::vector<double> t = tf_router.weights(tfidf.embed(own));
    const bool same = std::max_element(h.begin(), h.end()) - h.begin() ==
                      std::max_element(t.begin(), t.end()) - t.begin();
    std::vector<double> w = whole;
    if (same)
      for (size_t i = 0; i < w.size(); ++i) w[i] = 0.75 * t[i] + 0.25 * whole[i];
    (same ? moved : kept) += 1;
    want_w.push_back(w);
  }
  ASSERT_GT(moved, 0);  // the prompt exercises both branches
  ASSERT_GT(kept, 0);

  Running r(o, {}, keys);
  json body = completion(prompt, 4, "auto");
  auto res = r.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  const json& parts = j["clone"]["prompt_parts"];
  ASSERT_EQ(parts.size(), want_w.size());
  const char* names[] = {"quotes", "code", "scripture"};
  for (size_t k = 0; k < parts.size(); ++k)
    for (size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(parts[k]["experts"].value(names[i], 0.0), want_w[k][i], 1e-9)
          << k << " " << names[i];
  // Without TF-IDF keys, or with keys fitted on two banks, the check cannot be made.
  EXPECT_THROW(serve::Scheduler(base(), experts(), one_prompt_keys(tok, *emb), o), Error);
  std::vector<serve::ExpertKey> two_banks = keys;
  two_banks[1].tfidf_idf[0] += 1;
  EXPECT_THROW(serve::Scheduler(base(), experts(), two_banks, o), Error);
  serve::SchedulerOptions no_parts = o;
  no_parts.prompt_part = 0;
  EXPECT_THROW(serve::Scheduler(base(), experts(), keys, no_parts), Error);
}

// Unigram prompt parts: each part's weights are a softmax of its mean log-likelihood per token
// under each expert's unigram key, computed here from the key prompts' token counts.
TEST(Server, UnigramPromptPartsAreWeightedByEachExpertsLikelihoodOfThePart) {
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  auto emb = serve::make_hidden_embedder("hidden:2", base(), 1);
  std::vector<serve::ExpertKey> keys = one_prompt_keys(tok, *emb);
  const auto V = static_cast<size_t>(tok.n_vocab());
  std::vector<std::vector<double>> logp;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<double> c(V, 0.1);
    double total = 0.1 * static_cast<double>(V);
    for (int32_t t : tok.encode(kKeyPrompts[i], false)) c[static_cast<size_t>(t)] += 1, total += 1;
    for (double& x : c) x = std::log(x / total);
    logp.push_back(c);
    keys[i].unigram_logp.assign(c.begin(), c.end());
  }
  serve::SchedulerOptions o = opts();
  o.router.threshold = 0;
  o.prompt_part = 6;
  o.prompt_part_blend = 0.75;
  o.prompt_part_router = serve::PartRouter::Unigram;
  o.prompt_part_temperature = 0.5;
  const std::string prompt =
      "And the LORD spake unto Moses, saying: he that loveth not knoweth not; sum += God; is "
      "love for (int i = 0; i < n; the LORD spake a[i] unto";
  const serve::Router hidden_router(keys, o.router);
  const std::vector<int32_t> p = tok.encode(prompt, true);
  const auto n = static_cast<int64_t>(p.size());
  const std::vector<double> whole = hidden_router.weights(emb->embed(p));
  std::vector<std::vector<double>> want_w;
  for (int64_t start = 0; start < n; start += o.prompt_part) {
    std::vector<double> s(keys.size(), 0.0), w(keys.size());
    int64_t counted = 0;
    for (int64_t j = start; j < std::min(n, start + o.prompt_part); ++j) {
      if (p[static_cast<size_t>(j)] == tok.bos()) continue;
      ++counted;
      for (size_t e = 0; e < keys.size(); ++e)
        s[e] += logp[e][static_cast<size_t>(p[static_cast<size_t>(j)])];
    }
    double z = 0;
    for (size_t e = 0; e < keys.size(); ++e)
      z += (w[e] = std::exp(s[e] / static_cast<double>(counted) / 0.5));
    for (size_t e = 0; e < keys.size(); ++e) w[e] = 0.75 * w[e] / z + 0.25 * whole[e];
    want_w.push_back(w);
  }
  Running r(o, {}, keys);
  auto res = r.post("/v1/completions", completion(prompt, 4, "auto"));
  ASSERT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  const json& parts = j["clone"]["prompt_parts"];
  ASSERT_EQ(parts.size(), want_w.size());
  const char* names[] = {"quotes", "code", "scripture"};
  bool apart = false;
  for (size_t k = 0; k < parts.size(); ++k)
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(parts[k]["experts"].value(names[i], 0.0), want_w[k][i], 1e-6)
          << k << " " << names[i];
      apart |= std::fabs(want_w[k][i] - want_w[0][i]) > 0.2;
    }
  EXPECT_TRUE(apart);  // the parts were routed apart
  // Under load: concurrent routed requests, each prompt in parts with its own mixtures in the
  // same passes, are all served.
  serve::LoadOptions lo = two_request_load(r.port, 4, 2, 5);
  lo.routed = true;
  lo.prompts = {prompt, std::string(kKeyPrompts[2]) + " " + kKeyPrompts[0] + " " + kKeyPrompts[1]};
  const serve::LoadResult load = serve::run_load(lo, true);
  EXPECT_EQ(load.errors, 0) << (load.error_samples.empty() ? "" : load.error_samples[0]);
  EXPECT_EQ(load.requests, 2 * 4);
  // At blend 1 the whole prompt's weights have no share: its hidden embedding is not run, so
  // the simulated board's first token comes sooner than at 0.75 (which charges it), with the
  // same layer passes, and each part's mixture is its own likelihoods' softmax.
  double ttft[2] = {0, 0};
  for (const double blend : {0.75, 1.0}) {
    serve::SchedulerOptions ob = o;
    ob.prompt_part_blend = blend;
    ob.board.device = std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json";
    ob.board.controller = "performance";
    Running rb(ob, {}, keys);
    const auto got = rb.post("/v1/completions", completion(prompt, 2, "auto"));
    ASSERT_EQ(got->status, 200) << got->body;
    const json jb = json::parse(got->body);
    ttft[blend == 1.0] = jb["clone"]["device"]["ttft_ms"].get<double>();
    if (blend == 1.0) {
      for (size_t k = 0; k < parts.size(); ++k)
        for (size_t i = 0; i < 3; ++i)
          EXPECT_NEAR(jb["clone"]["prompt_parts"][k]["experts"].value(names[i], 0.0),
                      (want_w[k][i] - 0.25 * whole[i]) / 0.75, 1e-6);
    }
  }
  EXPECT_LT(ttft[1], ttft[0] * 0.97) << ttft[0];
  // Without unigram keys, or without parts, there is nothing to route by.
  EXPECT_THROW(serve::Scheduler(base(), experts(), one_prompt_keys(tok, *emb), o), Error);
  serve::SchedulerOptions no_parts = o;
  no_parts.prompt_part = 0;
  EXPECT_THROW(serve::Scheduler(base(), experts(), keys, no_parts), Error);
  EXPECT_THROW(serve::part_router_from_name("bayes"), Error);
}

TEST(Server, TheLoadGeneratorCountsWhatTheServerServed) {
  Running r(opts(4));
  serve::LoadOptions lo = two_request_load(r.port, 6, 3, 9);
  lo.experts = {"quotes", "code", "scripture"};
  lo.prompts = {"Hello", "In the beginning", "int x"};
  const serve::LoadResult got = serve::run_load(lo, true);
  EXPECT_EQ(got.errors, 0) << (got.error_samples.empty() ? "" : got.error_samples[0]);
  const std::string m = r.client().Get("/metrics")->body;
  EXPECT_EQ(got.requests, 2 * 6);
  EXPECT_EQ(static_cast<double>(got.requests), metric(m, "clone_requests_total{outcome=\"ok\"}"));
  EXPECT_EQ(static_cast<double>(got.tokens), metric(m, "clone_generated_tokens_total"));
  EXPECT_GT(got.ttft_p99_s, 0);
  EXPECT_GT(got.rss_end_mib, 10);  // this process holds the model
  lo.requests_per_client = -1;     // a bad limit is refused by name before anything is sent
  try {
    serve::run_load(lo, false);
    ADD_FAILURE() << "a negative request limit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("requests per client"), std::string::npos) << e.what();
  }
}

TEST(Server, ASimulatedBoardServesEachRequestAsCloneRunDeviceWould) {
  serve::SchedulerOptions o = opts(2);
  o.board.device = std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json";
  o.board.controller = "learned";
  o.board.policy_path = std::string(CLONE_SOURCE_DIR) + "/models/dvfs/orin-nx-16gb.json";
  Running r(o);
  const std::string prompt = "The computer";
  json body = completion(prompt, 20, "none");
  body["clone"]["ignore_eos"] = true;
  body["clone"]["slo"] = "smart-reply";
  body["clone"]["timeline"] = true;
  auto res = r.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  body["clone"].erase("timeline");
  const json j = json::parse(res->body);
  const json& d = j["clone"]["device"];
  ASSERT_TRUE(d.is_object()) << res->body;
  EXPECT_EQ(j["clone"]["slo"], "smart-reply");
  EXPECT_TRUE(d["power_mode"].is_null());  // no --modes

  // The same request through the engine's Context with dvfs::CoSim on its hook.
  const Tokenizer tok = Tokenizer::from_gguf(base()->gguf());
  const auto ids = tok.encode(prompt, true);
  dvfs::CoSimOptions co = o.board;
  co.slo = "smart-reply";
  co.n_batch = o.max_rows;
  dvfs::CoSim sim(base()->config(), co, static_cast<int64_t>(ids.size()), 20);
  Context ctx(base(), {256, 1, o.max_rows});
  ctx.set_hook(sim.hook());
  GenerateParams p;
  p.max_new = 20;
  p.sampling.temperature = 0;
  (void)generate(ctx, ids, p);
  const dvfs::RequestResult want = sim.finish();
  EXPECT_NEAR(d["ttft_ms"].get<double>(), 1e3 * want.ttft_s, 1e-6 * want.ttft_s * 1e3);
  EXPECT_NEAR(d["tpot_ms"].get<double>(), 1e3 * want.tpot_s, 1e-6 * want.tpot_s * 1e3);
  EXPECT_NEAR(d["energy_j"].get<double>(), want.energy_j, 1e-6 * want.energy_j);
  EXPECT_EQ(d["slo_met"], want.met);
  EXPECT_EQ(d["frequency_switches"], want.switches);
  EXPECT_NEAR(d["ttft_target_ms"].get<double>(), 1e3 * want.ttft_target_s, 1e-9);
  // ...and that target is the class's for this prompt's length, as `clone sim` sets it.
  const workload::SloClass& cls = workload::slo_class("smart-reply");
  EXPECT_NEAR(d["ttft_target_ms"].get<double>(),
              1e3 * (cls.ttft_base_s + cls.ttft_per_token_s * static_cast<double>(ids.size())),
              1e-9);
  EXPECT_GT(ids.size(), 1u);
  // Every layer of every pass it took part in, at some clock: the prompt pass and one
  // pass per token but the last, each n_layer + 1 layers (the head).
  int64_t layers = 0;
  for (const auto& [mhz, n] : d["layers_at_mhz"].items()) layers += n.get<int64_t>();
  EXPECT_EQ(layers, 20 * (base()->config().n_layer() + 1));
  // The timeline: the clock of every layer of every pass, as CoSim's trace has it.
  const json& tl = d["timeline_mhz"];
  ASSERT_EQ(tl.size(), 20u);
  for (const dvfs::TraceRow& row : sim.trace()) {
    const auto pass = static_cast<size_t>(row.pass), layer = static_cast<size_t>(row.layer);
    ASSERT_LT(pass, tl.size());
    ASSERT_EQ(tl[pass].size(), static_cast<size_t>(base()->config().n_layer() + 1));
    EXPECT_FLOAT_EQ(tl[pass][layer].get<float>(), static_cast<float>(row.mhz))
        << "pass " << pass << " layer " << layer;
  }

  // /metrics sums the board's numbers over requests.
  res = r.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200);
  const double e2 = json::parse(res->body)["clone"]["device"]["energy_j"].get<double>();
  EXPECT_TRUE(json::parse(res->body)["clone"]["device"]["timeline_mhz"].is_null());  // not asked
  const std::string m = r.client().Get("/metrics")->body;
  EXPECT_NEAR(metric(m, "clone_device_energy_joules_total"), d["energy_j"].get<double>() + e2,
              1e-6);
  EXPECT_EQ(metric(m, "clone_slo_total{class=\"smart-reply\",outcome=\"met\"}") +
                metric(m, "clone_slo_total{class=\"smart-reply\",outcome=\"missed\"}"),
            2);
  // Requests without an SLO get the scheduler's default class; unknown ones are refused.
  body["clone"].erase("slo");
  res = r.post("/v1/completions", body);
  EXPECT_EQ(json::parse(res->body)["clone"]["slo"], "chatbot");
}

// With --modes the request that finds the board idle chooses its power mode: the response
// and /metrics name it, and on the linux backend the mode's memory clock is put on the board.
TEST(Server, ARequestChoosesThePowerModeAndItIsPutOnTheBoard) {
  const std::filesystem::path root = cln::testing::make_tree("serve-modes");
  serve::SchedulerOptions o = opts(2);
  o.board.device = "orin-nano-super-8gb";
  o.board.controller = "performance";  // the fastest mode: MAXN_SUPER
  o.board.modes = {"all"};
  o.board.backend = "linux";
  o.board.sysfs_root = root.string();
  cln::testing::put(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate", "2133000000");
  Running r(o);
  json body = completion("The computer", 8, "none");
  body["clone"]["ignore_eos"] = true;
  const auto res = r.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  const json d = json::parse(res->body)["clone"]["device"];
  EXPECT_EQ(d["power_mode"], "MAXN_SUPER") << res->body;
  EXPECT_EQ(cln::testing::get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "3199000000");
  ASSERT_TRUE(d["measured"]["mode_set"].is_array()) << res->body;
  EXPECT_FALSE(d["measured"]["mode_set"].empty());
  EXPECT_EQ(metric(r.client().Get("/metrics")->body,
                   "clone_power_mode_requests_total{mode=\"MAXN_SUPER\"}"),
            1);
}

TEST(Server, TheLinuxBackendSetsTheKnobAtEveryLayerAndMeasuresTheRails) {
  // A Jetson-shaped sysfs tree: the GPU's devfreq (306-918 MHz) and VDD_IN at 10 W.
  const std::filesystem::path root = cln::testing::make_tree("serve-linux");
  const std::filesystem::path gpu = root / "sys/class/devfreq/17000000.gpu";
  cln::testing::put(gpu / "min_freq", "1");  // neither file holds a level before the server runs
  cln::testing::put(gpu / "max_freq", "2");
  serve::SchedulerOptions o = opts(2);
  o.board.device = std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json";
  o.board.controller = "powersave";  // the lowest model clock: 306 MHz on the knob
  o.board.backend = "linux";
  o.board.sysfs_root = root.string();
  Running r(o);
  json body = completion("The computer", 20, "none");
  body["clone"]["ignore_eos"] = true;
  auto res = r.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  const json d = json::parse(res->body)["clone"]["device"];
  const json& m = d["measured"];
  ASSERT_TRUE(m.is_object()) << res->body;
  EXPECT_EQ(m["board"], "linux:17000000.gpu");
  EXPECT_EQ(cln::testing::get(gpu / "min_freq"), "306000000");
  EXPECT_EQ(cln::testing::get(gpu / "max_freq"), "306000000");
  // Every layer the modelled board ran, the real one ran at the knob's matching clock.
  EXPECT_EQ(m["layers_at_mhz"], d["layers_at_mhz"]);
  EXPECT_EQ(m["layers_at_mhz"], json({{"306", 20 * (base()->config().n_layer() + 1)}}));
  // 10 W from the first layer to the end: a little less than 10 W x the time since
  // admission (the router and the first pass's set-up come before the first layer).
  const double t = m["time_ms"].get<double>() * 1e-3, e = m["energy_j"].get<double>();
  EXPECT_GT(t, 0);
  EXPECT_LE(e, 10.0 * t * 1.0001);
  EXPECT_GE(e, 10.0 * t * 0.5) << "t " << t;
  EXPECT_NEAR(metric(r.client().Get("/metrics")->body, "clone_measured_energy_joules_total"), e,
              1e-9 + 1e-9 * e);

  // A board that cannot be driven is refused at start, naming what is missing.
  serve::SchedulerOptions bad = o;
  bad.board.knob = "no-such-knob";
  try {
    Running fails(bad);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("no-such-knob"), std::string::npos) << err.what();
  }
}
