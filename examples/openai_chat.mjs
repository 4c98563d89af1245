#!/usr/bin/env node
// A streamed chat completion through the coordinator's OpenAI-compatible
// REST API with the official OpenAI Node SDK (npm openai@6).
//
//	make run   # in another terminal: coordinator + simulator
//	cd examples && npm ci && node openai_chat.mjs --base-url http://127.0.0.1:8080/v1
//
// Exits non-zero when the stream fails or carries no content.

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

const stream = await client.chat.completions.create({
  model: args.model,
  messages: [{ role: "user", content: "Say something about disaggregated serving." }],
  max_tokens: Number(args["max-tokens"]),
  stream: true,
  stream_options: { include_usage: true },
});

let content = "";
let chunks = 0;
let finish = null;
let usage = null;
for await (const chunk of stream) {
  chunks++;
  for (const choice of chunk.choices) {
    const delta = choice.delta?.content ?? "";
    content += delta;
    process.stdout.write(delta);
    finish = choice.finish_reason ?? finish;
  }
  usage = chunk.usage ?? usage;
}
process.stdout.write("\n");
console.log(`${chunks} chunks, finish_reason=${finish}, usage=${JSON.stringify(usage)}`);

if (content === "" || finish === null) {
  console.error("openai_chat: the stream carried no content or no finish_reason");
  process.exit(1);
}
