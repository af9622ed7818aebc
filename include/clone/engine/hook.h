// The layer-boundary hook: before each layer of every forward pass the engine tells a
// callback where it is, and the callback may act before the layer runs (the DVFS
// controller sets a frequency; the device simulator charges the layer's cost).
// It is called once more with layer == n_layer before the output head.
// When no hook is set the engine does not build the event at all.
#pragma once

#include <cstdint>
#include <functional>

namespace cln {

enum class Phase : uint8_t { Prefill, Decode };

struct LayerEvent {
  Phase phase;       // Prefill for a pass over the prompt, Decode for one new token
  int32_t layer;     // 0 .. n_layer-1, or n_layer for the output head
  int32_t n_layer;
  int64_t pos;       // position of the first token of this pass
  int64_t n_tokens;  // tokens in this pass
};

using LayerHook = std::function<void(const LayerEvent&)>;

}  // namespace cln
