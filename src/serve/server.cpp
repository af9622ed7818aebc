#include "clone/serve/server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "clone/core/error.h"
#include "page.h"

namespace cln::serve {

using nlohmann::json;

namespace {

// A request the client got wrong: the status and a message naming the problem.
struct BadRequest {
  int status;
  std::string message;
};
[[noreturn]] void bad(const std::string& m, int status = 400) {
  throw BadRequest{status, m};
}

const json& field(const json& j, const char* k) {
  static const json null;
  return j.contains(k) ? j.at(k) : null;
}

int64_t int_field(const json& j, const char* k, int64_t def, int64_t lo, int64_t hi) {
  const json& v = field(j, k);
  if (v.is_null()) return def;
  if (!v.is_number_integer()) bad(std::string("'") + k + "' must be an integer");
  const auto x = v.get<int64_t>();
  if (x < lo || x > hi)
    bad(std::string("'") + k + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
        "]");
  return x;
}

double num_field(const json& j, const char* k, double def, double lo, double hi) {
  const json& v = field(j, k);
  if (v.is_null()) return def;
  if (!v.is_number()) bad(std::string("'") + k + "' must be a number");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    bad(std::string("'") + k + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
        "]");
  return x;
}

// What one HTTP request asks for beyond the generation itself.
struct Call {
  GenRequest gen;
  bool stream = false, chat = false, include_usage = false;
  bool timeline = false;  // clone.timeline: the board's clock at every layer and token
  std::vector<std::string> stop;
  std::string slo;  // class name or "custom"
  double ttft_ms = 0, tpot_ms = 0;
};

Call parse(const std::string& body, bool chat, const ServerOptions& o, const Scheduler& s) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    bad(std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) bad("the body must be a JSON object");
  Call c;
  c.chat = chat;
  std::string prompt;
  if (chat) {
    if (!j.contains("messages")) bad("'messages' is required");
    try {
      prompt = render_chat(j.at("messages"), o.chat_template);
    } catch (const Error& e) {
      bad(e.what());
    }
  } else {
    const json& p = field(j, "prompt");
    if (p.is_string())
      prompt = p.get<std::string>();
    else if (p.is_array() && p.size() == 1 && p[0].is_string())
      prompt = p[0].get<std::string>();
    else
      bad("'prompt' must be a string (or a list of one string)");
  }
  if (int_field(j, "n", 1, 1, 1) != 1) bad("'n' must be 1");
  if (field(j, "echo").is_boolean() && j.at("echo").get<bool>()) bad("'echo' is not supported");
  if (!field(j, "logprobs").is_null() &&
      !(field(j, "logprobs").is_boolean() && !j.at("logprobs").get<bool>()))
    bad("'logprobs' is not supported");
  const json& st = field(j, "stream");
  if (!st.is_null() && !st.is_boolean()) bad("'stream' must be true or false");
  c.stream = st.is_boolean() && st.get<bool>();
  // OpenAI's stream_options.include_usage: one more chunk with the usage, before [DONE].
  const json& so = field(j, "stream_options");
  if (!so.is_null()) {
    if (!so.is_object()) bad("'stream_options' must be an object");
    const json& iu = field(so, "include_usage");
    if (!iu.is_null() && !iu.is_boolean())
      bad("'stream_options.include_usage' must be true or false");
    c.include_usage = iu.is_boolean() && iu.get<bool>();
  }
  const json& stop = field(j, "stop");
  if (stop.is_string()) {
    c.stop.push_back(stop.get<std::string>());
  } else if (stop.is_array()) {
    for (const json& x : stop) {
      if (!x.is_string()) bad("'stop' must be a string or a list of strings");
      c.stop.push_back(x.get<std::string>());
    }
  } else if (!stop.is_null()) {
    bad("'stop' must be a string or a list of strings");
  }
  for (const auto& x : c.stop)
    if (x.empty()) bad("'stop' strings must not be empty");
  c.gen.prompt = s.tokenizer().encode(prompt, true);
  const int64_t room =
      std::max<int64_t>(0, s.options().n_ctx - static_cast<int64_t>(c.gen.prompt.size()));
  const char* mt = j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  c.gen.max_tokens = int_field(j, mt, chat ? room : 16, 0, 1 << 20);
  c.gen.sampling.temperature = static_cast<float>(num_field(j, "temperature", 1.0, 0.0, 2.0));
  c.gen.sampling.top_p = static_cast<float>(num_field(j, "top_p", 1.0, 1e-6, 1.0));
  c.gen.sampling.top_k = static_cast<int>(int_field(j, "top_k", 0, 0, 1 << 20));
  c.gen.sampling.seed = static_cast<uint64_t>(int_field(j, "seed", 0, 0, INT64_MAX));
  // The clone extension: experts and SLO, strictly checked.
  const json& ext = field(j, "clone");
  if (!ext.is_null()) {
    if (!ext.is_object()) bad("'clone' must be an object");
    for (auto it = ext.begin(); it != ext.end(); ++it)
      if (it.key() != "experts" && it.key() != "slo" && it.key() != "ignore_eos" &&
          it.key() != "timeline")
        bad("unknown field 'clone." + it.key() + "' (experts, slo, ignore_eos, timeline)");
    const json& ex = field(ext, "experts");
    if (ex.is_string()) {
      const std::string m = ex.get<std::string>();
      if (m == "none")
        c.gen.experts.mode = ExpertChoice::Mode::None;
      else if (m != "auto")
        c.gen.experts = {ExpertChoice::Mode::Named, {{m, 1.0}}};
    } else if (ex.is_array()) {
      c.gen.experts.mode = ExpertChoice::Mode::Named;
      for (const json& x : ex) {
        if (!x.is_string()) bad("'clone.experts' as a list holds expert names");
        c.gen.experts.weights.emplace_back(x.get<std::string>(), 1.0);
      }
    } else if (ex.is_object()) {
      c.gen.experts.mode = ExpertChoice::Mode::Weights;
      for (auto it = ex.begin(); it != ex.end(); ++it) {
        if (!it.value().is_number()) bad("'clone.experts." + it.key() + "' must be a number");
        c.gen.experts.weights.emplace_back(it.key(), it.value().get<double>());
      }
    } else if (!ex.is_null()) {
      bad("'clone.experts' must be \"auto\", \"none\", a list of names or {name: weight}");
    }
    const json& slo = field(ext, "slo");
    if (slo.is_string()) {
      c.slo = slo.get<std::string>();
      if (std::find(o.slo_classes.begin(), o.slo_classes.end(), c.slo) == o.slo_classes.end())
        bad("unknown SLO class '" + c.slo + "' (chatbot, smart-reply, code-completion)");
    } else if (slo.is_object()) {
      for (auto it = slo.begin(); it != slo.end(); ++it)
        if (it.key() != "ttft_ms" && it.key() != "tpot_ms")
          bad("unknown field 'clone.slo." + it.key() + "' (ttft_ms, tpot_ms)");
      c.slo = "custom";
      c.ttft_ms = num_field(slo, "ttft_ms", 0, 1e-3, 1e9);
      c.tpot_ms = num_field(slo, "tpot_ms", 0, 1e-3, 1e9);
      if (c.ttft_ms <= 0 || c.tpot_ms <= 0) bad("'clone.slo' needs both ttft_ms and tpot_ms");
      c.gen.ttft_target_s = c.ttft_ms * 1e-3, c.gen.tpot_target_s = c.tpot_ms * 1e-3;
    } else if (!slo.is_null()) {
      bad("'clone.slo' must be a class name or {\"ttft_ms\", \"tpot_ms\"}");
    }
    c.gen.slo = c.slo;
    const json& ie = field(ext, "ignore_eos");
    if (!ie.is_null() && !ie.is_boolean()) bad("'clone.ignore_eos' must be true or false");
    c.gen.ignore_eos = ie.is_boolean() && ie.get<bool>();
    const json& tl = field(ext, "timeline");
    if (!tl.is_null() && !tl.is_boolean()) bad("'clone.timeline' must be true or false");
    c.timeline = tl.is_boolean() && tl.get<bool>();
  }
  return c;
}

const char* finish_reason(StopReason r) {
  return r == StopReason::Eos || r == StopReason::Caller ? "stop" : "length";
}

int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::atomic<int64_t> g_next_id{1};

// The text so far, cut at the first stop string if one appeared: true when it did.
bool cut_at_stop(std::string& text, const std::vector<std::string>& stops) {
  size_t at = std::string::npos;
  for (const auto& s : stops) at = std::min(at, text.find(s));
  if (at == std::string::npos) return false;
  text.resize(at);
  return true;
}

// The longest prefix of text[0, end) that does not stop inside a UTF-8 sequence: a
// character whose bytes come from several tokens is sent once it is whole.
size_t utf8_boundary(const std::string& text, size_t end) {
  size_t i = end, back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return end;
  const auto lead = static_cast<unsigned char>(text[i - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return back + 1 < need ? i - 1 : end;
}

// JSON text; invalid UTF-8 (a model can emit any bytes) becomes U+FFFD instead of throwing.
constexpr auto kReplace = json::error_handler_t::replace;

json clocks_json(const std::map<double, int64_t>& mhz_layers) {
  json clocks = json::object();
  for (const auto& [mhz, n] : mhz_layers)
    clocks[std::to_string(static_cast<int64_t>(std::lround(mhz)))] = n;
  return clocks;
}

// What the simulated board did for a request, for the response's extension object, and
// with the linux backend what the real board measured.
json device_json(const DeviceOutcome& d, bool timeline) {
  json measured = nullptr;
  if (d.measured)
    measured = {
        {"board", d.measured->board},
        {"time_ms", 1e3 * d.measured->time_s},
        {"energy_j", std::isnan(d.measured->energy_j) ? json(nullptr) : json(d.measured->energy_j)},
        {"layers_at_mhz", clocks_json(d.measured->mhz_layers)},
        {"mode_set", d.measured->mode_set}};
  return {{"ttft_ms", 1e3 * d.ttft_s},
          {"tpot_ms", 1e3 * d.tpot_s},
          {"e2e_ms", 1e3 * d.e2e_s},
          {"energy_j", d.energy_j},
          {"ttft_target_ms", 1e3 * d.ttft_target_s},
          {"tpot_target_ms", 1e3 * d.tpot_target_s},
          {"slo_met", d.met},
          {"feasible", d.feasible},
          {"power_mode", d.mode.empty() ? json(nullptr) : json(d.mode)},
          {"predicted_tokens", d.predicted_output},
          {"frequency_switches", d.switches},
          {"layers_at_mhz", clocks_json(d.mhz_layers)},
          {"measured", measured},
          {"timeline_mhz", timeline ? json(d.timeline) : json(nullptr)}};
}

}  // namespace

std::string render_chat(const json& messages, const std::string& tmpl) {
  if (!messages.is_array() || messages.empty()) fail("'messages' must be a non-empty list");
  std::string out;
  for (const json& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string())
      fail("every message needs a 'role' string");
    const std::string role = m.at("role").get<std::string>();
    if (role != "system" && role != "user" && role != "assistant")
      fail("unknown message role '", role, "' (system, user, assistant)");
    if (!m.contains("content") || !m.at("content").is_string())
      fail("every message needs a 'content' string");
    const std::string content = m.at("content").get<std::string>();
    if (tmpl == "raw")
      out += (out.empty() ? "" : "\n") + content;
    else if (tmpl == "chatml")
      out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
    else
      fail("unknown chat template '", tmpl, "' (raw, chatml)");
  }
  if (tmpl == "chatml") out += "<|im_start|>assistant\n";
  return out;
}

Server::Server(Scheduler& s, ServerOptions o)
    : s_(s), o_(std::move(o)), http_(std::make_unique<httplib::Server>()) {
  metrics_.describe("clone_requests_total", "counter", "Requests by outcome.");
  metrics_.describe("clone_generated_tokens_total", "counter", "Tokens generated.");
  metrics_.describe("clone_prompt_tokens_total", "counter", "Prompt tokens processed.");
  metrics_.describe("clone_passes_total", "counter", "Forward passes of the batch.");
  metrics_.describe("clone_expert_weight_total", "counter",
                    "Sum over requests of the magnitude of each expert's mixing weight.");
  metrics_.describe("clone_expert_requests_total", "counter", "Requests that used each expert.");
  metrics_.describe("clone_slots_active", "gauge", "Requests in the batch.");
  metrics_.describe("clone_device_energy_joules_total", "counter",
                    "Energy of the simulated board charged to finished requests.");
  metrics_.describe("clone_measured_energy_joules_total", "counter",
                    "Energy the real board's rails measured, charged to finished requests "
                    "(backend linux).");
  metrics_.describe("clone_slo_total", "counter",
                    "Finished requests by SLO class and whether the simulated board met it.");
  metrics_.describe("clone_power_mode_requests_total", "counter",
                    "Finished requests by the power mode the board ran them in (--modes).");
  metrics_.describe("clone_frequency_switches_total", "counter",
                    "Clock changes of the simulated board while each request ran (a change "
                    "during a pass of k requests counts k times).");
  metrics_.describe("clone_layers_at_clock_total", "counter",
                    "Request-layers the simulated board ran at each clock.");
  metrics_.describe_histogram("clone_device_ttft_seconds",
                              "Time to first token on the simulated board.",
                              {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  metrics_.describe_histogram("clone_device_tpot_seconds",
                              "Time per output token on the simulated board.",
                              {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5});
  metrics_.describe("clone_queue_length", "gauge", "Requests waiting for a slot.");
  metrics_.describe_histogram("clone_ttft_seconds", "Time to first token (wall clock).",
                              {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  metrics_.describe_histogram("clone_tpot_seconds", "Time per output token (wall clock).",
                              {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5});
  metrics_.describe_histogram("clone_batch_rows", "Tokens per forward pass.",
                              {1, 2, 4, 8, 16, 32, 64, 128, 256, 512});
  s_.on_pass = [this](int64_t rows, double) {
    metrics_.add("clone_passes_total", 1);
    metrics_.observe("clone_batch_rows", static_cast<double>(rows));
  };
  http_->new_task_queue = [this] {
    return new httplib::ThreadPool(static_cast<size_t>(o_.http_threads));
  };
  http_->set_payload_max_length(o_.max_body);
  // Clients (the openai package, load balancers) keep connections open for many requests.
  http_->set_keep_alive_max_count(10000);
  http_->set_keep_alive_timeout(60);
  routes();
}

Server::~Server() {
  s_.on_pass = nullptr;
}

namespace {

// cpp-httplib listens with a backlog of 5 (a compile-time constant of Debian's built
// library): 64 clients connecting at once overflow the accept queue and some of them read
// nothing back. listen() on a socket that already listens only changes its backlog, so the
// server's socket is found among this process's descriptors (listening, bound to `port`)
// and given the system's maximum.
void raise_backlog(int port) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(e.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int p = -1;
    if (addr.ss_family == AF_INET) p = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) p = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (p == port) ::listen(fd, SOMAXCONN);
  }
}

}  // namespace

int Server::bind() {
  if (o_.port == 0)
    port_ = http_->bind_to_any_port(o_.host);
  else
    port_ = http_->bind_to_port(o_.host, o_.port) ? o_.port : -1;
  if (port_ < 0) fail("cannot listen on ", o_.host, ":", o_.port, " (in use, or no permission)");
  raise_backlog(port_);
  return port_;
}

void Server::run() {
  http_->listen_after_bind();
}

void Server::stop() {
  s_.drain();
  while (!s_.idle()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  http_->stop();
}

void Server::routes() {
  auto error = [](httplib::Response& res, int status, const std::string& m) {
    res.status = status;
    res.set_content(json{{"error",
                          {{"message", m},
                           {"type", status == 503   ? "overloaded"
                                    : status >= 500 ? "server_error"
                                                    : "invalid_request_error"}}}}
                        .dump(-1, ' ', false, kReplace),
                    "application/json");
  };
  http_->set_error_handler([error](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      error(res, 413, "the request body is larger than the server accepts");
    else if (res.status == 404)
      error(res, 404, "no such endpoint: " + req.method + " " + req.path);
  });
  // A fault of ours, not the client's: 500 with what went wrong, and the server goes on.
  http_->set_exception_handler(
      [error](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        error(res, 500, "internal error: " + what);
      });
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"status", "ok"},
                         {"slots", s_.options().slots},
                         {"active", s_.active()},
                         {"queued", s_.queued()}}
                        .dump(-1, ' ', false, kReplace),
                    "application/json");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    metrics_.set("clone_slots_active", s_.active());
    metrics_.set("clone_queue_length", static_cast<double>(s_.queued()));
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"object", "list"},
                         {"data", json::array({{{"id", o_.model_name},
                                                {"object", "model"},
                                                {"created", 0},
                                                {"owned_by", "clone"}}})},
                         {"clone", {{"experts", s_.expert_names()}}}}
                        .dump(-1, ' ', false, kReplace),
                    "application/json");
  });
  http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kChatPage, "text/html; charset=utf-8");
  });
  auto generate = [this, error](bool chat) {
    return [this, error, chat](const httplib::Request& req, httplib::Response& res) {
      Call c;
      std::shared_ptr<Ticket> t;
      try {
        c = parse(req.body, chat, o_, s_);
        t = s_.submit(c.gen);
      } catch (const BadRequest& b) {
        metrics_.add("clone_requests_total", 1, {{"outcome", "bad_request"}});
        return error(res, b.status, b.message);
      } catch (const Error& e) {
        metrics_.add("clone_requests_total", 1, {{"outcome", "bad_request"}});
        return error(res, 400, e.what());
      }
      if (!t) {
        metrics_.add("clone_requests_total", 1, {{"outcome", "rejected"}});
        return error(res, 503, "the server is busy or shutting down: retry later");
      }
      const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(g_next_id++);
      const int64_t created = now_unix();
      const std::string object = chat ? "chat.completion" : "text_completion";
      auto extension = [this, c](const GenResult& r) {
        json w = json::object();
        for (const auto& [n, v] : r.weights) w[n] = v;
        json rr = json::array();
        for (const auto& x : r.reroutes) {
          json e = json::object();
          for (const auto& [n, v] : x.weights) e[n] = v;
          rr.push_back({{"after_tokens", x.after}, {"experts", e}});
        }
        json parts = json::array();
        for (const auto& x : r.prompt_parts) {
          json e = json::object();
          for (const auto& [n, v] : x.weights) e[n] = v;
          parts.push_back({{"from_token", x.from}, {"experts", e}});
        }
        return json{
            {"experts", w},
            {"prompt_parts", parts},
            {"reroutes", rr},
            {"slo", r.device        ? json(r.device->slo)
                    : c.slo.empty() ? json(nullptr)
                                    : json(c.slo)},
            {"predicted_tokens", r.predicted_tokens > 0 ? json(r.predicted_tokens) : json(nullptr)},
            {"device", r.device ? device_json(*r.device, c.timeline) : json(nullptr)},
            {"timings_ms",
             {{"queue", 1e3 * r.queue_s},
              {"route", 1e3 * r.route_s},
              {"ttft", 1e3 * r.ttft_s},
              {"tpot", 1e3 * r.tpot_s},
              {"e2e", 1e3 * r.e2e_s}}}};
      };
      auto finished = [this](const GenResult& r) {
        metrics_.add("clone_requests_total", 1, {{"outcome", "ok"}});
        metrics_.add("clone_generated_tokens_total", static_cast<double>(r.tokens.size()));
        metrics_.add("clone_prompt_tokens_total", static_cast<double>(r.prompt_tokens));
        if (!r.tokens.empty()) metrics_.observe("clone_ttft_seconds", r.ttft_s);
        if (r.tokens.size() > 1) metrics_.observe("clone_tpot_seconds", r.tpot_s);
        for (const auto& [n, w] : r.weights) {
          metrics_.add("clone_expert_weight_total", std::fabs(w), {{"expert", n}});
          metrics_.add("clone_expert_requests_total", 1, {{"expert", n}});
        }
        if (r.device) {
          const DeviceOutcome& d = *r.device;
          metrics_.add("clone_device_energy_joules_total", d.energy_j);
          if (d.measured && !std::isnan(d.measured->energy_j))
            metrics_.add("clone_measured_energy_joules_total", d.measured->energy_j);
          metrics_.add("clone_slo_total", 1,
                       {{"class", d.slo}, {"outcome", d.met ? "met" : "missed"}});
          if (!d.mode.empty())
            metrics_.add("clone_power_mode_requests_total", 1, {{"mode", d.mode}});
          metrics_.add("clone_frequency_switches_total", static_cast<double>(d.switches));
          metrics_.observe("clone_device_ttft_seconds", d.ttft_s);
          if (r.tokens.size() > 1) metrics_.observe("clone_device_tpot_seconds", d.tpot_s);
          for (const auto& [mhz, n] : d.mhz_layers)
            metrics_.add("clone_layers_at_clock_total", static_cast<double>(n),
                         {{"mhz", std::to_string(static_cast<int64_t>(std::lround(mhz)))}});
        }
      };
      if (!c.stream) {
        std::string text;
        bool stopped = false;
        for (;;) {
          const auto e = t->next(1.0);
          if (!e) continue;
          if (e->kind == GenEvent::Kind::Done) break;
          if (stopped) continue;
          text += e->text;
          if (!c.stop.empty() && cut_at_stop(text, c.stop)) stopped = true, t->cancel();
        }
        const GenResult& r = t->result();
        finished(r);
        const std::string reason = stopped ? "stop" : finish_reason(r.stop);
        json choice = {{"index", 0}, {"finish_reason", reason}};
        if (chat)
          choice["message"] = {{"role", "assistant"}, {"content", text}};
        else
          choice["text"] = text, choice["logprobs"] = nullptr;
        const auto n = static_cast<int64_t>(r.tokens.size());
        res.set_content(json{{"id", id},
                             {"object", object},
                             {"created", created},
                             {"model", o_.model_name},
                             {"choices", json::array({choice})},
                             {"usage",
                              {{"prompt_tokens", r.prompt_tokens},
                               {"completion_tokens", n},
                               {"total_tokens", r.prompt_tokens + n}}},
                             {"clone", extension(r)}}
                            .dump(-1, ' ', false, kReplace),
                        "application/json");
        return;
      }
      // Server-Sent Events: one chunk per token, a last chunk with the finish reason and
      // the extension, then [DONE]. A client that goes away cancels the request.
      struct State {
        std::string text;
        size_t sent = 0;  // bytes of text already sent
        bool first = true, stopped = false;
      };
      auto st = std::make_shared<State>();
      const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, t, st, c, id, created, chunk_object, chat, extension, finished](
              size_t, httplib::DataSink& sink) {
            auto send = [&](const json& choice, const json* ext) {
              json j = {{"id", id},
                        {"object", chunk_object},
                        {"created", created},
                        {"model", o_.model_name},
                        {"choices", json::array({choice})}};
              if (ext) j["clone"] = *ext;
              const std::string line = "data: " + j.dump(-1, ' ', false, kReplace) + "\n\n";
              return sink.write(line.data(), line.size());
            };
            auto piece = [&](const std::string& text) {
              json choice = {{"index", 0}, {"finish_reason", nullptr}};
              if (chat) {
                choice["delta"] = st->first ? json{{"role", "assistant"}, {"content", text}}
                                            : json{{"content", text}};
              } else {
                choice["text"] = text, choice["logprobs"] = nullptr;
              }
              st->first = false;
              return send(choice, nullptr);
            };
            for (;;) {
              if (!sink.is_writable()) {
                t->cancel();
                return false;
              }
              const auto e = t->next(0.25);
              if (!e) continue;
              if (e->kind == GenEvent::Kind::Token) {
                if (st->stopped) continue;
                st->text += e->text;
                if (!c.stop.empty() && cut_at_stop(st->text, c.stop))
                  st->stopped = true, t->cancel();
                // Hold back what could be the start of a stop string.
                size_t safe = st->text.size();
                if (!st->stopped)
                  for (const auto& s : c.stop)
                    for (size_t k = std::min(s.size() - 1, st->text.size()); k > 0; --k)
                      if (st->text.compare(st->text.size() - k, k, s, 0, k) == 0) {
                        safe = std::min(safe, st->text.size() - k);
                        break;
                      }
                safe = utf8_boundary(st->text, safe);
                if (safe > st->sent) {
                  if (!piece(st->text.substr(st->sent, safe - st->sent))) {
                    t->cancel();
                    return false;
                  }
                  st->sent = safe;
                }
                continue;
              }
              const GenResult& r = t->result();
              if (st->text.size() > st->sent && !piece(st->text.substr(st->sent))) return false;
              finished(r);
              json choice = {{"index", 0},
                             {"finish_reason", st->stopped ? "stop" : finish_reason(r.stop)}};
              if (chat)
                choice["delta"] = json::object();
              else
                choice["text"] = "", choice["logprobs"] = nullptr;
              const json ext = extension(r);
              send(choice, &ext);
              if (c.include_usage) {
                const auto n = static_cast<int64_t>(r.tokens.size());
                const json u = {{"id", id},
                                {"object", chunk_object},
                                {"created", created},
                                {"model", o_.model_name},
                                {"choices", json::array()},
                                {"usage",
                                 {{"prompt_tokens", r.prompt_tokens},
                                  {"completion_tokens", n},
                                  {"total_tokens", r.prompt_tokens + n}}}};
                const std::string line = "data: " + u.dump(-1, ' ', false, kReplace) + "\n\n";
                sink.write(line.data(), line.size());
              }
              const std::string done = "data: [DONE]\n\n";
              sink.write(done.data(), done.size());
              sink.done();
              return true;
            }
          },
          [this, t](bool success) {
            // The client left before the end: free its slot and count it.
            if (!success) {
              t->cancel();
              metrics_.add("clone_requests_total", 1, {{"outcome", "cancelled"}});
            }
          });
    };
  };
  http_->Post("/v1/completions", generate(false));
  http_->Post("/v1/chat/completions", generate(true));
}

}  // namespace cln::serve
