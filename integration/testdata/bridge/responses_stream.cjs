// Streams one Responses request through the gateway with the official
// openai npm package's client.responses.stream(), whose accumulator throws
// on any event out of grammar, and prints what it accumulated as JSON:
// {"events": [event types], "final": <finalResponse()>}.
//
// Environment: OPENAI_NODE_DIR (where `npm install openai` went),
// GATEWAY_URL (ending in /v1).
'use strict';
const path = require('node:path');
const { default: OpenAI } = require(path.join(process.env.OPENAI_NODE_DIR, 'node_modules', 'openai'));

async function main() {
  const client = new OpenAI({ apiKey: 'test-key', baseURL: process.env.GATEWAY_URL, maxRetries: 0 });
  const stream = client.responses.stream({
    model: 'gpt-5.5',
    instructions: 'You are a coding agent.',
    input: 'Create hello.txt',
    reasoning: { effort: 'medium' },
    tools: [
      { type: 'function', name: 'exec_command', strict: false,
        parameters: { type: 'object', properties: { cmd: { type: 'string' } } } },
      { type: 'custom', name: 'apply_patch' },
    ],
  });
  const events = [];
  for await (const event of stream) {
    events.push(event.type);
  }
  const final = await stream.finalResponse();
  process.stdout.write(JSON.stringify({ events, final }) + '\n');
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + '\n');
  process.exit(1);
});
