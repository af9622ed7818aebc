// clone tokenize: a GGUF's vocabulary applied to a text; prints ids and pieces.
#include <cstdio>
#include <memory>
#include <string>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_tokenize {

struct Opts {
  std::string model, prompt, file;
  bool has_prompt = false;  // an empty prompt is a prompt
  bool no_bos = false;
  bool ids_only = false;
};

// A vocabulary piece as printable text: U+2581 and other UTF-8 stay as they are, control
// bytes become C escapes so that one token stays on one line.
std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n')
      o += "\\n";
    else if (c == '\t')
      o += "\\t";
    else if (c == '\r')
      o += "\\r";
    else if (c == '\\')
      o += "\\\\";
    else if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

int run(const Opts& o) {
  using namespace cln;
  if (o.has_prompt == !o.file.empty()) fail("give exactly one of --prompt and --file");
  const auto gguf = GgufFile::open(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(*gguf);
  const std::string text = o.has_prompt ? o.prompt : cli::read_text_file(o.file);
  const std::vector<int32_t> ids = tok.encode(text, tok.vocab().add_bos && !o.no_bos);
  if (o.ids_only) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ", ";
      line += std::to_string(ids[i]);
    }
    std::printf("%s]\n", line.c_str());
    return 0;
  }
  for (int32_t id : ids)
    std::printf("%6d  %s\n", id, printable(tok.vocab().tokens[static_cast<size_t>(id)]).c_str());
  return 0;
}

const cln::cli::Register reg{
    "tokenize", "Token ids and pieces of a text under a GGUF's vocabulary", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->model, "GGUF file with a tokenizer (a model or vocab only)")
          ->required()
          ->check(CLI::ExistingFile);
      CLI::Option* prompt = app.add_option("-p,--prompt", o->prompt, "text to tokenize");
      app.add_option("-f,--file", o->file, "file whose text to tokenize")->check(CLI::ExistingFile);
      app.add_flag("--no-bos", o->no_bos,
                   "do not put BOS first (default: as tokenizer.ggml.add_bos_token says)");
      app.add_flag("--ids", o->ids_only, "print only the ids, as a list [1, 2, ...]");
      return [o, prompt] {
        o->has_prompt = prompt->count() > 0;
        return run(*o);
      };
    }};

}  // namespace cmd_tokenize
