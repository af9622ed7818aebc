// Loads `clone serve`'s chat page in headless Chromium (puppeteer-core driving Debian's
// chromium), sends a prompt as a user would, and checks what the page shows: the prompt,
// a streamed answer equal to the API's for the same request, the experts' weights (per prompt
// part for a routed prompt that changes domain), TTFT and TPOT, and the simulated board's numbers (SLO verdict, energy, clocks, and the timeline
// of the clock at every layer and token, drawn on a canvas).
// Usage: node page_client.cjs <server URL> <chromium path>   (exit 0 when every check passes)
"use strict";
const puppeteer = require("puppeteer-core");
const assert = require("node:assert/strict");

async function main() {
  const [url, chromium] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]});
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", e => errors.push(String(e)));
    await page.goto(url + "/", {waitUntil: "networkidle0"});
    assert.equal(await page.title(), "clone");
    await page.waitForFunction(
        () => document.getElementById("models").textContent.includes("experts: scripture"));
    // The same request through the API, greedy, for the expected answer.
    const api = await (await fetch(url + "/v1/chat/completions", {
      method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({messages: [{role: "user", content: "In the beginning"}], max_tokens: 12,
                            temperature: 0, clone: {experts: ["scripture"], timeline: true}})})).json();
    const want = api.choices[0].message.content;
    const timeline = api.clone.device.timeline_mhz;

    await page.$eval("#max", el => { el.value = "12"; });
    await page.$eval("#experts", el => { el.value = "scripture"; });
    await page.$eval("#temp", el => { el.value = "0"; });
    await page.type("#prompt", "In the beginning");
    await page.click("#send");
    await page.waitForFunction(() => {
      const info = document.querySelectorAll(".info:not(.caption)");
      return info.length > 1 && info[info.length - 1].textContent.includes("board");
    }, {timeout: 60000}).catch(async e => {
      const log = await page.evaluate(() => document.getElementById("log").innerHTML);
      throw new Error(e.message + "; page errors: " + JSON.stringify(errors) + "; page shows: " + log);
    });
    const shown = await page.evaluate(() => ({
      user: [...document.querySelectorAll(".user")].map(e => e.textContent),
      answer: [...document.querySelectorAll(".assistant")].map(e => e.textContent),
      info: [...document.querySelectorAll(".info:not(.caption)")].map(e => e.textContent).slice(1),
    }));
    assert.deepEqual(shown.user, ["In the beginning"]);
    assert.equal(shown.answer[0], want);
    const info = shown.info[0];
    assert.match(info, /experts: scripture 1\.00/);
    assert.match(info, /TTFT \d+ ms, TPOT [\d.]+ ms/);
    assert.match(info, /finish: (length|stop)/);
    assert.match(info, /board \(chatbot\): TTFT [\d.]+ \/ [\d.]+ ms, TPOT [\d.]+ \/ [\d.]+ ms, SLO (met|missed), energy [\d.]+ J/);
    assert.match(info, /layers per clock: \d+ MHz x\d+/);
    // The clock timeline: one column per pass of this answer, one row per layer and the head.
    const canvas = await page.evaluate(() => {
      const c = [...document.querySelectorAll("canvas.timeline")].pop();
      return c && {passes: +c.dataset.passes, layers: +c.dataset.layers, cells: +c.dataset.cells,
                   caption: c.nextElementSibling.textContent};
    });
    assert.ok(canvas, "no timeline canvas");
    assert.equal(canvas.passes, timeline.length);
    assert.equal(canvas.layers, timeline[0].length);
    assert.equal(canvas.cells, timeline.flat().length);
    assert.match(canvas.caption, /clock per layer .* \d+ MHz \(dark\) to \d+ MHz \(bright\)/);
    // A routed prompt that turns from scripture to quotes: the page lists its parts' mixtures,
    // the first under scripture, the last under quotes.
    await page.$eval("#max", el => { el.value = "2"; });
    await page.$eval("#experts", el => { el.value = "auto"; });
    await page.type("#prompt", "And the LORD spake unto Moses, saying, Speak unto the children " +
      "of Israel, and say unto them, When any man of you bring an offering unto the LORD, ye " +
      "shall bring your offering of the cattle. Imagination is more important than knowledge. " +
      "Knowledge is limited, imagination encircles the world. Be yourself; everyone else is " +
      "already taken.");
    await page.click("#send");
    await page.waitForFunction(() => {
      const info = document.querySelectorAll(".info:not(.caption)");
      return info.length > 2 && info[info.length - 1].textContent.includes("board");
    }, {timeout: 60000});
    const routed = await page.evaluate(
        () => [...document.querySelectorAll(".info:not(.caption)")].pop().textContent);
    const parts = (routed.match(/prompt parts: (.*)/) || [, ""])[1].split("; ");
    assert.ok(parts.length >= 3, routed);
    assert.match(parts[0], /^from token 0: scripture 1\.00/);
    const last = Object.fromEntries(parts[parts.length - 1].replace(/^from token \d+: /, "")
        .split(", ").map(e => e.split(" ")).map(([n, v]) => [n, +v]));
    assert.ok((last.quotes || 0) > (last.scripture || 0), routed);
    assert.deepEqual(errors, []);
    console.log("page: all checks passed; answer " + JSON.stringify(want) + "\n" + info + "\n" +
                routed);
  } finally {
    await browser.close();
  }
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
