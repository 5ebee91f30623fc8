// Runs one multi-step tool loop of the Vercel AI SDK (ai + @ai-sdk/openai,
// the Responses API model) against the gateway and prints what the SDK saw
// as one JSON object on stdout.
//
//   node tool_loop.mjs <generate|stream> <false|default>
//
// generate: generateText; stream: streamText, reading fullStream. The second
// argument is providerOptions.openai.store: false, or left to the SDK's
// default (true, so the SDK sends item_reference for the items it thinks the
// server stored).
//
// Environment: AISDK_DIR (where `npm install ai @ai-sdk/openai zod` went),
// GATEWAY_URL (ending in /v1), MODEL (the upstream's model id).
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = process.env.AISDK_DIR;
const resolve = createRequire(path.join(dir, 'package.json')).resolve;
const load = (name) => import(pathToFileURL(resolve(name)).href);
const { generateText, streamText, tool, stepCountIs } = await load('ai');
const { createOpenAI } = await load('@ai-sdk/openai');
const { z } = await load('zod');

const [mode, storeArg] = process.argv.slice(2);
if (!['generate', 'stream'].includes(mode) || !['false', 'default'].includes(storeArg)) {
  process.stderr.write('usage: tool_loop.mjs <generate|stream> <false|default>\n');
  process.exit(2);
}

const provider = createOpenAI({ baseURL: process.env.GATEWAY_URL, apiKey: 'test-key' });
const model = provider.responses(process.env.MODEL);

// What the tools were called with, in order.
const executed = [];
const tools = {
  get_weather: tool({
    description: 'The current weather in a city, in degrees Celsius.',
    inputSchema: z.object({ city: z.string() }),
    execute: async (input) => {
      executed.push({ name: 'get_weather', input });
      return { city: input.city, celsius: 20, sky: 'clear' };
    },
  }),
  to_fahrenheit: tool({
    description: 'Converts degrees Celsius to Fahrenheit.',
    inputSchema: z.object({ celsius: z.number() }),
    execute: async (input) => {
      executed.push({ name: 'to_fahrenheit', input });
      return { fahrenheit: input.celsius * 9 / 5 + 32 };
    },
  }),
};

const openai = { forceReasoning: true, reasoningEffort: 'high' };
if (storeArg === 'false') openai.store = false;

const settings = {
  model,
  system: 'You are a weather assistant.',
  prompt: 'What is the weather in Paris, in Celsius and Fahrenheit?',
  tools,
  stopWhen: stepCountIs(3),
  maxRetries: 0,
  providerOptions: { openai },
};

// describeError keeps what the test asserts on: the HTTP status and the
// message the gateway (or the upstream through it) gave.
function describeError(err) {
  const e = err && err.lastError ? err.lastError : err; // RetryError wraps
  const out = { name: e && e.name, message: String(e && e.message) };
  if (e && e.statusCode !== undefined) out.status = e.statusCode;
  if (e && e.responseBody !== undefined) out.body = e.responseBody;
  if (e && e.data && e.data.error) out.code = e.data.error.code;
  return out;
}

const summary = { mode, store: storeArg, steps: [], executed, text: null, stream_reasoning: [], part_types: [], errors: [] };

function stepSummary(s) {
  return {
    finish_reason: s.finishReason,
    text: s.text,
    reasoning_text: s.reasoningText ?? null,
    tool_calls: s.toolCalls.map((c) => ({ name: c.toolName, input: c.input })),
    tool_results: s.toolResults.map((r) => ({ name: r.toolName, output: r.output })),
  };
}

try {
  let steps, text;
  if (mode === 'generate') {
    const r = await generateText(settings);
    ({ steps, text } = r);
  } else {
    const r = streamText({ ...settings, onError: () => {} });
    // The reasoning the stream parts show, per step: the text of its
    // reasoning-delta parts, however many reasoning parts carry it (the
    // SDK's reasoningText joins them the same way).
    const reasoning = summary.stream_reasoning;
    for await (const part of r.fullStream) {
      if (summary.part_types[summary.part_types.length - 1] !== part.type) summary.part_types.push(part.type);
      switch (part.type) {
        case 'start-step':
          reasoning.push('');
          break;
        case 'reasoning-delta':
          if (reasoning.length === 0) reasoning.push('');
          reasoning[reasoning.length - 1] += part.text;
          break;
        case 'error':
          summary.errors.push(describeError(part.error));
          break;
      }
    }
    if (summary.errors.length === 0) {
      steps = await r.steps;
      text = await r.text;
    }
  }
  if (steps) {
    summary.steps = steps.map(stepSummary);
    summary.text = text;
  }
} catch (err) {
  summary.errors.push(describeError(err));
}
process.stdout.write(JSON.stringify(summary) + '\n');
