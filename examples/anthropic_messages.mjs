#!/usr/bin/env node
// The Anthropic Messages API through the coordinator's POST /v1/messages
// with the official Anthropic TypeScript SDK (npm @anthropic-ai/sdk):
// messages.create, then messages.stream, then messages.countTokens (POST
// /v1/messages/count_tokens) of the same conversation, which must equal the
// answer's usage.input_tokens, then a bad request, which must come back as
// the SDK's BadRequestError (Anthropic's error JSON).
//
//	make run   # in another terminal: coordinator + simulator
//	cd examples && npm ci && node anthropic_messages.mjs --base-url http://127.0.0.1:8080
//
// Exits non-zero when an answer carries no text or no usage, the count
// differs from the answer's input tokens, or the error is not Anthropic's.

import { parseArgs } from "node:util";
import Anthropic from "@anthropic-ai/sdk";

const { values: args } = parseArgs({
  options: {
    "base-url": { type: "string", default: "http://127.0.0.1:8080" },
    model: { type: "string", default: "sim-model" },
    "max-tokens": { type: "string", default: "24" },
  },
});

const client = new Anthropic({
  baseURL: args["base-url"],
  apiKey: process.env.ANTHROPIC_API_KEY ?? "unused", // the coordinator takes no key
  maxRetries: 0,
  timeout: 30_000,
});

const fail = (msg) => {
  console.error(`anthropic_messages: ${msg}`);
  process.exit(1);
};

const request = {
  model: args.model,
  max_tokens: Number(args["max-tokens"]),
  messages: [{ role: "user", content: "Say something about disaggregated serving." }],
};

const message = await client.messages.create(request);
const text = message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
if (text === "" || !message.usage || message.stop_reason === null) fail("the answer carried no text, usage or stop_reason");
console.log(`not streamed: ${JSON.stringify(text)}, stop_reason=${message.stop_reason}, usage=${JSON.stringify(message.usage)}`);

const stream = client.messages.stream(request);
let streamed = "";
stream.on("text", (delta) => {
  streamed += delta;
  process.stdout.write(delta);
});
const final = await stream.finalMessage();
process.stdout.write("\n");
const finalText = final.content.filter((b) => b.type === "text").map((b) => b.text).join("");
if (streamed === "" || finalText !== streamed) fail(`streamed ${JSON.stringify(streamed)}, final message ${JSON.stringify(finalText)}`);
if (final.usage.output_tokens <= 0 || final.usage.input_tokens <= 0) fail(`streamed usage ${JSON.stringify(final.usage)}`);
console.log(`streamed: stop_reason=${final.stop_reason}, usage=${JSON.stringify(final.usage)}`);

const { max_tokens: _, ...countRequest } = request; // count_tokens takes no max_tokens
const count = await client.messages.countTokens({ ...countRequest, system: "Be brief." });
const counted = await client.messages.create({ ...request, system: "Be brief." });
if (count.input_tokens <= 0 || count.input_tokens !== counted.usage.input_tokens) {
  fail(`countTokens ${JSON.stringify(count)} != usage.input_tokens ${counted.usage.input_tokens}`);
}
console.log(`countTokens: input_tokens=${count.input_tokens}, as messages.create's usage`);

try {
  await client.messages.create({ ...request, messages: [{ role: "user", content: [{ type: "no_such_block" }] }] });
  fail("a request with an unknown content block was answered");
} catch (err) {
  if (!(err instanceof Anthropic.BadRequestError) || err.error?.type !== "error" || err.error?.error?.type !== "invalid_request_error") {
    fail(`expected an Anthropic invalid_request_error, got ${err}`);
  }
  console.log(`bad request: ${err.status} ${err.error.error.type}`);
}
