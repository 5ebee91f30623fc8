// Feeds an Anthropic Messages SSE byte stream (read from stdin) to the
// official SDK's accumulators, client.messages.stream() (MessageStream)
// and client.beta.messages.stream() (BetaMessageStream, what Claude Code
// uses), through a fetch that answers with those bytes: the SDK's own SSE
// decoder reads them, as it reads a server's. Prints
// {"message": <finalMessage()>, "beta": <finalMessage()>, "events": [...]}
// or, when the SDK throws, {"error": {name, message}} and exits 1.
//
// ANTHROPIC_SDK_DIR is a directory npm installed @anthropic-ai/sdk into.
'use strict';
const path = require('node:path');
const fs = require('node:fs');

const dir = process.env.ANTHROPIC_SDK_DIR;
if (!dir) {
  console.error('ANTHROPIC_SDK_DIR is not set');
  process.exit(2);
}
const sdk = require(path.join(dir, 'node_modules', '@anthropic-ai', 'sdk'));
const Anthropic = sdk.Anthropic || sdk.default;

const bytes = fs.readFileSync(0);

function client() {
  return new Anthropic({
    apiKey: 'test',
    baseURL: 'http://sdk-check.invalid',
    maxRetries: 0,
    fetch: async () =>
      new Response(bytes, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
}

const params = {
  model: 'sdk-check',
  max_tokens: 1024,
  messages: [{ role: 'user', content: 'check' }],
};

async function run(stream) {
  const events = [];
  stream.on('streamEvent', (ev) => events.push(ev.type));
  const message = await stream.finalMessage();
  return { message, events };
}

(async () => {
  const out = {};
  try {
    const a = await run(client().messages.stream(params));
    out.message = a.message;
    out.events = a.events;
    const b = await run(client().beta.messages.stream(params));
    out.beta = b.message;
    out.beta_events = b.events;
  } catch (e) {
    out.error = { name: e && e.constructor ? e.constructor.name : 'Error', message: String(e && e.message) };
    process.stdout.write(JSON.stringify(out));
    process.exit(1);
  }
  process.stdout.write(JSON.stringify(out));
})();
