// The chat page `clone serve` returns for GET /: one self-contained HTML file (no
// external scripts or styles) that talks to /v1/chat/completions with streaming and
// shows the experts' weights (per prompt part where the prompt was routed in parts), timings, the
// predicted length and, with a simulated board, its TTFT/TPOT against the SLO, energy, the clocks
// its layers ran at and a timeline of the clock at every layer and token (a canvas heatmap), from
// the "clone" extension of the last chunk.
#pragma once

namespace cln::serve {

inline constexpr const char* kChatPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>clone</title>
<style>
body { font-family: sans-serif; max-width: 48rem; margin: 1rem auto; padding: 0 1rem; }
#log { border: 1px solid #ccc; min-height: 12rem; padding: .5rem; white-space: pre-wrap; }
.user { color: #333; font-weight: bold; margin-top: .5rem; }
.assistant { color: #05a; }
.info { color: #777; font-size: .85em; white-space: pre-wrap; }
.error { color: #b00; }
form { display: flex; gap: .5rem; margin-top: .5rem; }
#prompt { flex: 1; }
canvas.timeline { display: block; margin: .25rem 0; border: 1px solid #ccc; image-rendering: pixelated; }
</style>
</head>
<body>
<h1>clone</h1>
<p class="info" id="models">loading models...</p>
<div id="log" aria-live="polite"></div>
<form id="form">
  <input id="prompt" autocomplete="off" placeholder="Type a prompt" required>
  <label>experts <input id="experts" value="auto" size="10"
    title="auto, none, or names separated by commas"></label>
  <label>max tokens <input id="max" type="number" value="64" min="1" max="4096"></label>
  <label>temperature <input id="temp" type="number" value="0.8" min="0" max="2" step="0.1"></label>
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const log = document.getElementById("log");
function line(cls, text) {
  const d = document.createElement("div");
  d.className = cls;
  d.textContent = text;
  log.appendChild(d);
  return d;
}
fetch("/v1/models").then(r => r.json()).then(j => {
  const ex = (j.clone && j.clone.experts) || [];
  document.getElementById("models").textContent =
    "model " + j.data[0].id + "; experts: " + (ex.length ? ex.join(", ") : "none");
}).catch(e => { document.getElementById("models").textContent = "models: " + e; });
// The board's clock at every layer (rows, the head last) of every pass (columns: the
// prompt, then one per token), dark at the lowest clock seen, bright at the highest.
function drawTimeline(after, rows) {
  const layers = Math.max(...rows.map(r => r.length));
  const all = rows.flat();
  const lo = Math.min(...all), hi = Math.max(...all);
  const cell = Math.max(2, Math.min(12, Math.floor(640 / rows.length)));
  const c = document.createElement("canvas");
  c.className = "timeline";
  c.width = rows.length * cell;
  c.height = layers * 6;
  const g = c.getContext("2d");
  let cells = 0;
  rows.forEach((r, x) => r.forEach((mhz, y) => {
    const v = hi > lo ? (mhz - lo) / (hi - lo) : 1;
    g.fillStyle = "hsl(" + (240 - 200 * v) + ", 80%, " + (25 + 45 * v) + "%)";
    g.fillRect(x * cell, y * 6, cell, 6);
    ++cells;
  }));
  c.dataset.passes = rows.length;
  c.dataset.layers = layers;
  c.dataset.cells = cells;
  c.title = "clock per layer and token";
  const cap = document.createElement("div");
  cap.className = "info caption";
  cap.textContent = "clock per layer (rows, head last) and pass (columns: prompt, then each token): " +
    lo.toFixed(0) + " MHz (dark) to " + hi.toFixed(0) + " MHz (bright)";
  after.after(c);
  c.after(cap);
}
function expertsField(v) {
  v = v.trim();
  if (v === "" || v === "auto" || v === "none") return v || "auto";
  return v.split(",").map(s => s.trim()).filter(s => s);
}
document.getElementById("form").addEventListener("submit", async ev => {
  ev.preventDefault();
  const input = document.getElementById("prompt");
  const text = input.value;
  input.value = "";
  line("user", text);
  const out = line("assistant", "");
  const info = line("info", "");
  const body = {
    model: "clone", stream: true,
    max_tokens: parseInt(document.getElementById("max").value, 10),
    temperature: parseFloat(document.getElementById("temp").value),
    messages: [{role: "user", content: text}],
    clone: {experts: expertsField(document.getElementById("experts").value), timeline: true}
  };
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    if (!r.ok) {
      const j = await r.json();
      info.className = "error";
      info.textContent = r.status + ": " + j.error.message;
      return;
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, k);
        buf = buf.slice(k + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        const c = j.choices[0];
        if (c.delta && c.delta.content) out.textContent += c.delta.content;
        if (j.clone) {
          const w = Object.entries(j.clone.experts).map(([n, v]) => n + " " + v.toFixed(2));
          const t = j.clone.timings_ms;
          let text = "experts: " + (w.length ? w.join(", ") : "none") +
            " | TTFT " + t.ttft.toFixed(0) + " ms, TPOT " + t.tpot.toFixed(1) + " ms" +
            " | finish: " + c.finish_reason;
          if (j.clone.predicted_tokens) text += " | predicted " + j.clone.predicted_tokens + " tokens";
          const parts = j.clone.prompt_parts || [];
          if (parts.length)
            text += "\nprompt parts: " + parts.map(p => "from token " + p.from_token + ": " +
              Object.entries(p.experts).map(([n, v]) => n + " " + v.toFixed(2)).join(", ")).join("; ");
          const d = j.clone.device;
          if (d) {
            const clocks = Object.entries(d.layers_at_mhz).map(([mhz, n]) => mhz + " MHz x" + n);
            text += "\nboard (" + j.clone.slo + "): TTFT " + d.ttft_ms.toFixed(0) + " / " +
              d.ttft_target_ms.toFixed(0) + " ms, TPOT " + d.tpot_ms.toFixed(1) + " / " +
              d.tpot_target_ms.toFixed(1) + " ms, SLO " + (d.slo_met ? "met" : "missed") +
              ", energy " + d.energy_j.toFixed(2) + " J, " + d.frequency_switches +
              " clock switches; layers per clock: " + clocks.join(", ");
          }
          info.textContent = text;
          if (d && d.timeline_mhz && d.timeline_mhz.length) drawTimeline(info, d.timeline_mhz);
        }
      }
    }
  } catch (e) {
    info.className = "error";
    info.textContent = String(e);
  }
});
</script>
</body>
</html>
)HTML";

}  // namespace cln::serve
