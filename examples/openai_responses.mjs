#!/usr/bin/env node
// The OpenAI Responses API through the coordinator's POST /v1/responses
// with the official OpenAI Node SDK (npm openai@6): client.responses.create
// streamed, then not, with "store": false (nothing kept: the stored
// conversation is openai_responses_stored.mjs), then
// client.responses.inputTokens.count (POST /v1/responses/input_tokens) of
// the same input, which must equal the answer's usage.input_tokens.
//
//	make run   # in another terminal: coordinator + simulator
//	cd examples && npm ci && node openai_responses.mjs --base-url http://127.0.0.1:8080/v1
//
// Exits non-zero when either answer carries no text or no usage, the
// streamed text differs from the stream's own final response, or the count
// differs from the answer's input tokens.

import { parseArgs } from "node:util";
import OpenAI from "openai";

const { values: args } = parseArgs({
  options: {
    "base-url": { type: "string", default: "http://127.0.0.1:8080/v1" },
    model: { type: "string", default: "sim-model" },
    "max-tokens": { type: "string", default: "24" },
  },
});

const client = new OpenAI({
  baseURL: args["base-url"],
  apiKey: process.env.OPENAI_API_KEY ?? "unused", // the coordinator takes no key
  maxRetries: 0,
  timeout: 30_000,
});

const fail = (msg) => {
  console.error(`openai_responses: ${msg}`);
  process.exit(1);
};

const request = {
  model: args.model,
  input: "Say something about disaggregated serving.",
  max_output_tokens: Number(args["max-tokens"]),
  store: false,
};

const stream = await client.responses.create({ ...request, stream: true });
let text = "";
let events = 0;
let completed = null;
for await (const event of stream) {
  events++;
  if (event.type === "response.output_text.delta") {
    text += event.delta;
    process.stdout.write(event.delta);
  } else if (event.type === "response.completed") {
    completed = event.response;
  } else if (event.type === "error") {
    fail(`error event: ${event.message}`);
  }
}
process.stdout.write("\n");
if (text === "" || completed === null) fail("the stream carried no text or no response.completed");
const final = completed.output.flatMap((o) => o.content ?? []).map((c) => c.text).join("");
if (final !== text) fail(`streamed text ${JSON.stringify(text)} != completed text ${JSON.stringify(final)}`);
console.log(`${events} events, status=${completed.status}, usage=${JSON.stringify(completed.usage)}`);

const response = await client.responses.create(request);
if (!response.output_text || !response.usage) fail("the answer carried no output_text or no usage");
console.log(`not streamed: ${JSON.stringify(response.output_text)}, usage=${JSON.stringify(response.usage)}`);

const count = await client.responses.inputTokens.count({ model: request.model, input: request.input });
if (count.object !== "response.input_tokens" || count.input_tokens <= 0 || count.input_tokens !== response.usage.input_tokens) {
  fail(`inputTokens.count ${JSON.stringify(count)} != usage.input_tokens ${response.usage.input_tokens}`);
}
console.log(`inputTokens.count: input_tokens=${count.input_tokens}, as responses.create's usage`);
