#!/usr/bin/env node
// Stored OpenAI Responses through the coordinator (docs/responses-messages.md
// "Stored responses") with the official OpenAI Node SDK (npm openai@6): a
// conversation by previous_response_id, client.responses.retrieve,
// client.responses.inputItems.list (paged), client.responses.delete, and
// the NotFoundError a deleted id then raises; then a Conversations round
// trip: client.conversations.create, responses.create({conversation}),
// client.conversations.items.list (paged), items.retrieve, items.delete,
// client.conversations.delete.
//
//	make run   # in another terminal: coordinator + simulator
//	cd examples && npm ci && node openai_responses_stored.mjs --base-url http://127.0.0.1:8080/v1
//
// Exits non-zero when any answer is not what the OpenAI API would give.

import { parseArgs } from "node:util";
import OpenAI from "openai";

const { values: args } = parseArgs({
  options: {
    "base-url": { type: "string", default: "http://127.0.0.1:8080/v1" },
    model: { type: "string", default: "sim-model" },
  },
});

const client = new OpenAI({
  baseURL: args["base-url"],
  apiKey: process.env.OPENAI_API_KEY ?? "unused", // the coordinator takes no key
  maxRetries: 0,
  timeout: 30_000,
});

const fail = (msg) => {
  console.error(`openai_responses_stored: ${msg}`);
  process.exit(1);
};

// Three turns, each continuing the last (store is OpenAI's default: true).
let previous = undefined;
const turns = [];
for (const text of ["Name three prime numbers.", "And their sum?", "Is that prime?"]) {
  const r = await client.responses.create({
    model: args.model, input: text, max_output_tokens: 8, previous_response_id: previous,
  });
  if (!r.id) fail("an answer without an id");
  turns.push(r);
  previous = r.id;
}
console.log(`three turns: ${turns.map((r) => r.id).join(" → ")}`);

const last = turns[2];
const got = await client.responses.retrieve(last.id);
if (got.id !== last.id || got.output_text !== last.output_text) fail(`retrieve: ${JSON.stringify(got)}`);

// Input items of the third turn: user, answer, user, answer, user, two a page.
const items = [];
for await (const item of client.responses.inputItems.list(last.id, { limit: 2, order: "asc" })) {
  items.push(item);
}
if (items.length !== 5) fail(`input items: ${items.length}, want 5: ${JSON.stringify(items)}`);
if (items.some((it) => !it.id)) fail("an input item without an id");
if (items[1].id !== turns[0].output[0].id) fail("the first answer is not the second input item");
console.log(`input items: ${items.map((it) => it.role ?? it.type).join(", ")}`);

await client.responses.delete(turns[0].id);
try {
  await client.responses.retrieve(turns[0].id);
  fail("a deleted response was retrieved");
} catch (err) {
  if (!(err instanceof OpenAI.NotFoundError)) throw err;
  console.log(`deleted: ${err.status} ${err.message}`);
}

// A conversation: created with a developer item, continued by two turns.
const conv = await client.conversations.create({
  metadata: { topic: "primes" },
  items: [{ type: "message", role: "developer", content: "Answer in one word." }],
});
if (!conv.id?.startsWith("conv_") || conv.object !== "conversation" || conv.metadata?.topic !== "primes") {
  fail(`conversations.create: ${JSON.stringify(conv)}`);
}
const convTurns = [];
for (const text of ["Name a prime number.", "And the next one?"]) {
  const r = await client.responses.create({
    model: args.model, input: text, max_output_tokens: 8, conversation: conv.id,
  });
  if (!r.id) fail("a conversation turn without an id");
  convTurns.push(r);
}
const convItems = [];
for await (const item of client.conversations.items.list(conv.id, { limit: 2, order: "asc" })) {
  convItems.push(item);
}
// developer, then user and answer of each turn.
if (convItems.length !== 5) fail(`conversation items: ${convItems.length}, want 5: ${JSON.stringify(convItems)}`);
if (convItems[2].id !== convTurns[0].output[0].id) fail("the first answer is not the third conversation item");
console.log(`conversation items: ${convItems.map((it) => it.role ?? it.type).join(", ")}`);

const one = await client.conversations.items.retrieve(convItems[1].id, { conversation_id: conv.id });
if (one.id !== convItems[1].id) fail(`conversations.items.retrieve: ${JSON.stringify(one)}`);
const after = await client.conversations.items.delete(convItems[1].id, { conversation_id: conv.id });
if (after.id !== conv.id) fail(`conversations.items.delete: ${JSON.stringify(after)}`);

const gone = await client.conversations.delete(conv.id);
if (gone.id !== conv.id || gone.object !== "conversation.deleted" || gone.deleted !== true) {
  fail(`conversations.delete: ${JSON.stringify(gone)}`);
}
try {
  await client.conversations.retrieve(conv.id);
  fail("a deleted conversation was retrieved");
} catch (err) {
  if (!(err instanceof OpenAI.NotFoundError)) throw err;
  console.log(`conversation deleted: ${err.status} ${err.message}`);
}
