// Drives `clone serve` with the official `openai` npm package: completions and chat, plain
// and streaming (the streamed text must equal the plain one), the extension object, the
// model list, and errors surfacing as the client's APIError with the server's message.
// Usage: node openai_client.cjs <base URL>   (exit 0 when every check passes)
"use strict";
const OpenAI = require("openai");
const assert = require("node:assert/strict");

async function main() {
  const client = new OpenAI({baseURL: process.argv[2], apiKey: "unused", maxRetries: 0});
  const models = await client.models.list();
  assert.equal(models.data[0].id, "clone");

  const ask = {model: "clone", prompt: "In the beginning", max_tokens: 12, temperature: 0,
               clone: {experts: ["scripture"]}};
  const plain = await client.completions.create(ask);
  assert.equal(plain.object, "text_completion");
  assert.ok(plain.choices[0].text.length > 0);
  assert.equal(plain.usage.completion_tokens + plain.usage.prompt_tokens, plain.usage.total_tokens);
  assert.deepEqual(plain.clone.experts, {scripture: 1});
  let streamed = "";
  for await (const chunk of await client.completions.create({...ask, stream: true}))
    streamed += chunk.choices[0].text;
  assert.equal(streamed, plain.choices[0].text);

  const chatAsk = {model: "clone", messages: [{role: "user", content: "Love is"}],
                   max_tokens: 10, temperature: 0, clone: {experts: {quotes: 0.8}}};
  const chat = await client.chat.completions.create(chatAsk);
  assert.equal(chat.choices[0].message.role, "assistant");
  let chatStreamed = "", finish = null, ext = null;
  for await (const chunk of await client.chat.completions.create({...chatAsk, stream: true})) {
    chatStreamed += chunk.choices[0].delta.content ?? "";
    finish = chunk.choices[0].finish_reason ?? finish;
    ext = chunk.clone ?? ext;
  }
  assert.equal(chatStreamed, chat.choices[0].message.content);
  assert.equal(finish, chat.choices[0].finish_reason);
  assert.deepEqual(ext.experts, {quotes: 0.8});

  await assert.rejects(
      client.completions.create({...ask, clone: {experts: ["nobody"]}}),
      e => e instanceof OpenAI.APIError && e.status === 400 && /unknown expert 'nobody'/.test(e.message));
  await assert.rejects(
      client.chat.completions.create({model: "clone", messages: [{role: "robot", content: "x"}]}),
      e => e instanceof OpenAI.APIError && e.status === 400 && /role 'robot'/.test(e.message));
  console.log("openai client: all checks passed; completion " + JSON.stringify(plain.choices[0].text));
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
