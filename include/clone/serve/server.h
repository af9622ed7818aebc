// `clone serve`: an OpenAI-compatible HTTP server (cpp-httplib) in front of the scheduler.
//   POST /v1/completions, /v1/chat/completions   (Server-Sent Events when "stream": true)
//   GET  /v1/models, /health, /metrics (Prometheus text), / (a chat page)
// Extension fields go in a "clone" object: in the request, "experts" ("auto", "none", a
// list of names, or {name: weight}) and "slo" (a class name or {"ttft_ms", "tpot_ms"});
// in the response, the experts' weights, timings and the device's numbers when one is
// simulated. Bad requests get 4xx with a message naming the problem; a full queue 503.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "clone/serve/metrics.h"
#include "clone/serve/scheduler.h"

namespace httplib {
class Server;
}

namespace cln::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see bound_port())
  std::string model_name = "clone";
  std::string chat_template = "raw";  // "raw" (contents joined by newlines) or "chatml"
  size_t max_body = 1 << 20;          // bytes; larger bodies get 413
  int http_threads = 16;
  std::vector<std::string> slo_classes = {"chatbot", "smart-reply", "code-completion"};
};

// Renders chat messages into a prompt; throws cln::Error on an unknown template or role.
std::string render_chat(const nlohmann::json& messages, const std::string& chat_template);

class Server {
 public:
  Server(Scheduler& s, ServerOptions o);
  ~Server();
  // Binds the socket (throws cln::Error naming host and port if it cannot); returns the port.
  int bind();
  int bound_port() const { return port_; }
  void run();  // serves until stop()
  // Stops taking requests, waits until every admitted or queued one has finished, then
  // stops the listener (what SIGTERM does).
  void stop();
  Metrics& metrics() { return metrics_; }

 private:
  void routes();
  Scheduler& s_;
  ServerOptions o_;
  std::unique_ptr<httplib::Server> http_;
  Metrics metrics_;
  int port_ = 0;
};

}  // namespace cln::serve
