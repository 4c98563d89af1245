// Tests the TypeScript SDK against a live coordinator in front of
// coordinator-sim: sdk/run-tests.sh starts both and sets
// COORDINATOR_GRPC_ADDR. The expected token IDs and logprobs are
// sdk/testdata/sim.json, which `go test ./sdk` keeps equal to package sim.
// The control plane's tests need the control listener too
// (COORDINATOR_CONTROL_ADDR; `make run` serves it on 127.0.0.1:9091 without
// a token) and, for the refusal, its token (COORDINATOR_CONTROL_TOKEN). They
// pause and relabel the whole fleet, so they live in this file: node runs a
// file's tests one after the other, but files side by side.
//
//	COORDINATOR_GRPC_ADDR=127.0.0.1:9090 COORDINATOR_CONTROL_ADDR=127.0.0.1:9091 npm test

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { after, afterEach, before, describe, it } from "node:test";

import {
  Code,
  ConnectError,
  Endpoint,
  FinishReason,
  connect,
  connectControl,
  controlFailure,
  create,
  membershipChanged,
  mergeTokens,
  GenerateRequestSchema,
  GenerateStreamRequestSchema,
  type ControlClient,
  type CoordinatorClient,
  type TokensRequest,
  type TokensResponse,
} from "../src/index.js";
import { TokensRequestSchema } from "../gen/coordinator/v1/coordinator_pb.js";

interface Fixture {
  tokens: {
    model: string;
    prompt: number[];
    n: number;
    max_tokens: number;
    logprobs: number;
    temperature: number;
    seed: number;
    choices: {
      index: number;
      token_ids: number[];
      logprobs: number[];
      top_logprobs: { token_id: number; logprob: number }[][];
      finish_reason: string;
    }[];
    usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  };
  chat: { model: string; message: string; max_tokens: number; content: string };
}

// dist/test/sdk.test.js → sdk/testdata/sim.json
const fixture: Fixture = JSON.parse(readFileSync(new URL("../../../testdata/sim.json", import.meta.url), "utf8"));
const address = process.env.COORDINATOR_GRPC_ADDR ?? "";
const controlAddress = process.env.COORDINATOR_CONTROL_ADDR ?? "";
const controlToken = process.env.COORDINATOR_CONTROL_TOKEN || undefined;

// The strict simulator wants a fresh request id per request.
const requestId = () => `sdk-ts-${randomUUID()}`;

function tokensRequest(): TokensRequest {
  const c = fixture.tokens;
  return create(TokensRequestSchema, {
    model: c.model,
    tokenIds: c.prompt,
    sampling: { maxTokens: c.max_tokens, n: c.n, logprobs: c.logprobs, temperature: c.temperature, seed: BigInt(c.seed) },
  });
}

// view is the choices as plain values, in the fixture's shape.
function view(resp: TokensResponse) {
  return resp.choices.map((ch) => ({
    index: ch.index,
    token_ids: ch.tokenIds,
    logprob_ids: ch.logprobs.map((lp) => lp.tokenId),
    logprobs: ch.logprobs.map((lp) => lp.logprob),
    top_logprobs: ch.logprobs.map((lp) => lp.topLogprobs.map((t) => ({ token_id: t.tokenId, logprob: t.logprob }))),
    finish_reason: `FINISH_REASON_${FinishReason[ch.finishReason]}`,
  }));
}

// want is the fixture's choices, logprobs rounded to float32 as the wire carries them.
function want() {
  return fixture.tokens.choices.map((ch) => ({
    index: ch.index,
    token_ids: ch.token_ids,
    logprob_ids: ch.token_ids,
    logprobs: ch.logprobs.map(Math.fround),
    top_logprobs: ch.top_logprobs.map((top) => top.map((t) => ({ token_id: t.token_id, logprob: Math.fround(t.logprob) }))),
    finish_reason: ch.finish_reason,
  }));
}

function usageOf(resp: TokensResponse) {
  const u = resp.usage;
  assert.ok(u, "usage is set");
  return { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.totalTokens };
}

describe("coordinator TypeScript SDK", { skip: address === "" ? "set COORDINATOR_GRPC_ADDR (sdk/run-tests.sh does)" : false }, () => {
  let client: CoordinatorClient;
  before(() => {
    client = connect(address, { defaultTimeoutMs: 30_000 });
  });
  after(() => client.close());

  async function generateTokens(): Promise<TokensResponse> {
    const id = requestId();
    const resp = await client.generate(create(GenerateRequestSchema, { requestId: id, input: { case: "tokens", value: tokensRequest() } }));
    assert.equal(resp.requestId, id);
    assert.equal(resp.output.case, "tokens");
    return resp.output.value;
  }

  it("answers a tokens Generate exactly, and the same twice", async () => {
    const first = await generateTokens();
    assert.deepEqual(view(first), want());
    assert.deepEqual(usageOf(first), fixture.tokens.usage);
    assert.equal(first.promptLogprobs.length, 0);
    // The second run takes the conditional-decode path and must answer the same.
    const second = await generateTokens();
    assert.deepEqual(view(second), view(first));
  });

  it("streams the same tokens as Generate", async () => {
    const chunks = [];
    for await (const msg of client.generateStream(
      create(GenerateStreamRequestSchema, { requestId: requestId(), input: { case: "tokens", value: tokensRequest() } }),
    )) {
      chunks.push(msg);
    }
    assert.ok(chunks.length > 1, "the answer streams in increments");
    const withUsage = chunks.flatMap((c, i) => (c.chunk.case === "tokens" && c.chunk.value.usage ? [i] : []));
    assert.deepEqual(withUsage, [chunks.length - 1], "usage comes with the last chunk only");
    const streamed = await mergeTokens(chunks);
    assert.deepEqual(view(streamed), want());
    assert.deepEqual(usageOf(streamed), fixture.tokens.usage);
    assert.deepEqual(view(streamed), view(await generateTokens()));
  });

  it("answers an OpenAI chat completion body", async () => {
    const c = fixture.chat;
    const body = { model: c.model, max_tokens: c.max_tokens, messages: [{ role: "user", content: c.message }] };
    const resp = await client.generate(
      create(GenerateRequestSchema, {
        input: {
          case: "openai",
          value: { endpoint: Endpoint.CHAT_COMPLETIONS, json: new TextEncoder().encode(JSON.stringify(body)) },
        },
      }),
    );
    assert.equal(resp.output.case, "openai");
    assert.equal(resp.output.value.statusCode, 200);
    assert.match(resp.output.value.contentType, /^application\/json/);
    const answer = JSON.parse(new TextDecoder().decode(resp.output.value.json));
    assert.equal(answer.object, "chat.completion");
    assert.equal(answer.choices[0].message.content, c.content);
    assert.equal(answer.usage.completion_tokens, c.max_tokens);
  });

  it("streams an OpenAI chat completion as server-sent event data", async () => {
    const c = fixture.chat;
    const body = { model: c.model, max_tokens: c.max_tokens, stream: true, messages: [{ role: "user", content: c.message }] };
    const events: string[] = [];
    for await (const msg of client.generateStream(
      create(GenerateStreamRequestSchema, {
        input: {
          case: "openai",
          value: { endpoint: Endpoint.CHAT_COMPLETIONS, json: new TextEncoder().encode(JSON.stringify(body)) },
        },
      }),
    )) {
      assert.equal(msg.chunk.case, "openai");
      events.push(...msg.chunk.value.data.map((d) => new TextDecoder().decode(d)));
    }
    assert.equal(events.at(-1), "[DONE]");
    const content = events
      .slice(0, -1)
      .flatMap((e) => JSON.parse(e).choices.map((ch: { delta: { content?: string } }) => ch.delta.content ?? ""))
      .join("");
    assert.equal(content, c.content);
  });

  it("streams an Anthropic Messages answer as typed events", async () => {
    const body = { model: "sim-model", max_tokens: 4, stream: true, messages: [{ role: "user", content: "Hello" }] };
    const names: string[] = [];
    for await (const msg of client.generateStream(
      create(GenerateStreamRequestSchema, {
        input: {
          case: "openai",
          value: { endpoint: Endpoint.MESSAGES, json: new TextEncoder().encode(JSON.stringify(body)) },
        },
      }),
    )) {
      if (msg.chunk.case !== "openai") {
        assert.fail(`a ${msg.chunk.case} chunk`);
      }
      const events = msg.chunk.value;
      assert.equal(events.event.length, events.data.length, "every event's type travels with it");
      events.data.forEach((d, i) => {
        assert.equal(JSON.parse(new TextDecoder().decode(d)).type, events.event[i]);
      });
      names.push(...events.event);
    }
    assert.equal(names[0], "message_start");
    assert.equal(names.at(-1), "message_stop");
    assert.equal(names.filter((n) => n === "content_block_delta").length, 4);
  });

  it("keeps a conversation: created, continued by a Responses turn, listed, deleted", async () => {
    const enc = new TextEncoder();
    const dec = new TextDecoder();
    const created = JSON.parse(dec.decode((await client.createConversation({
      json: enc.encode(JSON.stringify({ items: [{ type: "message", role: "developer", content: "Be brief." }] })),
    })).json));
    assert.equal(created.object, "conversation");
    const body = { model: "sim-model", input: "Hello", max_output_tokens: 4, conversation: created.id, store: false };
    const resp = await client.generate(
      create(GenerateRequestSchema, {
        input: { case: "openai", value: { endpoint: Endpoint.RESPONSES, json: enc.encode(JSON.stringify(body)) } },
      }),
    );
    assert.equal(resp.output.case, "openai");
    const answer = JSON.parse(dec.decode(resp.output.value.json));
    const items = JSON.parse(dec.decode((await client.listConversationItems({ id: created.id, order: "asc" })).json));
    assert.deepEqual(items.data.map((it: { role?: string }) => it.role), ["developer", "user", "assistant"]);
    assert.equal(items.last_id, answer.output[0].id);
    const deleted = JSON.parse(dec.decode((await client.deleteConversation({ id: created.id })).json));
    assert.deepEqual(deleted, { id: created.id, object: "conversation.deleted", deleted: true });
    await assert.rejects(client.getConversation({ id: created.id }), (err: ConnectError) => err.code === Code.NotFound);
  });

  it("rejects an invalid request with InvalidArgument naming the field", async () => {
    const cases: [string, TokensRequest][] = [
      ["tokens.token_ids", create(TokensRequestSchema, { model: "sim-model" })],
      ["tokens.sampling.top_p", create(TokensRequestSchema, { model: "sim-model", tokenIds: [1, 2], sampling: { topP: 0 } })],
    ];
    for (const [field, tokens] of cases) {
      await assert.rejects(
        client.generate(create(GenerateRequestSchema, { requestId: requestId(), input: { case: "tokens", value: tokens } })),
        (err: unknown) => {
          assert.ok(err instanceof ConnectError, String(err));
          assert.equal(err.code, Code.InvalidArgument);
          assert.match(err.rawMessage, new RegExp(field.replaceAll(".", "\\.")));
          return true;
        },
      );
    }
  });
});

// waitFor polls cond until it holds; fails after timeoutMs.
async function waitFor(what: string, cond: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      assert.fail(`${what}: not after ${timeoutMs}ms`);
    }
    await delay(20);
  }
}

// rejection is the ConnectError p fails with.
async function rejection(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ConnectError, String(err));
    return err;
  }
  return assert.fail("the call succeeded");
}

describe("coordinator TypeScript SDK: the control plane", {
  skip: address === "" || controlAddress === "" ? "set COORDINATOR_GRPC_ADDR and COORDINATOR_CONTROL_ADDR (sdk/run-tests.sh does)" : false,
}, () => {
  let ctl: ControlClient;
  let client: CoordinatorClient;
  before(() => {
    ctl = connectControl(controlAddress, { token: controlToken, defaultTimeoutMs: 30_000 });
    client = connect(address, { defaultTimeoutMs: 60_000 });
  });
  after(() => {
    ctl.close();
    client.close();
  });
  // Every test ends on a running fleet at v1.
  afterEach(async () => {
    await ctl.resume({});
    await ctl.setWeightVersion({ version: "v1" });
  });

  it("lists one engine per role with the epoch", async () => {
    const fleet = await ctl.listWorkers({});
    assert.ok(fleet.epoch > 0n);
    assert.equal(fleet.fleetPaused, false);
    assert.deepEqual(fleet.workers.map((w) => w.worker?.role), ["decode", "encode", "prefill"]);
    for (const w of fleet.workers) {
      assert.ok(w.reachable, w.error);
      assert.equal(w.worker?.id, `${w.worker?.role}/${w.worker?.address}`);
    }
    const decode = await ctl.listWorkers({ target: { selector: { case: "role", value: "decode" } } });
    assert.deepEqual(decode.workers.map((w) => w.worker?.role), ["decode"]);
  });

  it("holds a Generate sent during a keep pause until the resume, relabelled v2", async () => {
    const fleet = await ctl.listWorkers({});
    const paused = await ctl.pause({ mode: "keep", epoch: fleet.epoch });
    assert.deepEqual(paused.results.map((r) => r.ok), [true, true, true]);
    const id = requestId();
    let done = false;
    const held = client
      .generate(create(GenerateRequestSchema, { requestId: id, input: { case: "tokens", value: tokensRequest() } }))
      .finally(() => {
        done = true;
      });
    let released: number | undefined;
    try {
      await waitFor("the Generate held at admission", async () => (await ctl.listWorkers({})).heldRequests === 1);
      assert.equal(done, false, "a Generate sent during the pause waits for the resume");
      await ctl.setWeightVersion({ version: "v2", epoch: fleet.epoch });
      assert.deepEqual((await ctl.listWorkers({})).workers.map((w) => w.weightVersion), ["v2", "v2", "v2"]);
      assert.equal(done, false);
    } finally {
      released = (await ctl.resume({ epoch: fleet.epoch })).releasedRequests;
    }
    assert.equal(released, 1);
    const resp = await held;
    assert.equal(resp.requestId, id);
    assert.equal(resp.output.case, "tokens");
    assert.deepEqual(view(resp.output.value), want());
    assert.equal((await ctl.listWorkers({})).fleetPaused, false);
  });

  it("refuses a call without the token", { skip: controlToken === undefined ? "set COORDINATOR_CONTROL_TOKEN" : false }, async () => {
    for (const token of [undefined, `${controlToken}x`]) {
      const bad = connectControl(controlAddress, { token, defaultTimeoutMs: 30_000 });
      try {
        const err = await rejection(bad.pause({ mode: "keep" }));
        assert.equal(err.code, Code.Unauthenticated);
      } finally {
        bad.close();
      }
    }
    assert.equal((await ctl.listWorkers({})).fleetPaused, false, "a refused Pause paused nothing");
  });

  it("reads the ControlFailure of a fan-out in which a worker failed", async () => {
    const fleet = await ctl.listWorkers({});
    const ids = fleet.workers.map((w) => w.worker?.id ?? "");
    const err = await rejection(
      ctl.relay({ route: "weight_checker", body: { action: "nope" }, workerBodies: { [ids[0]]: { action: "reset" } } }),
    );
    assert.equal(err.code, Code.Unavailable);
    assert.equal(membershipChanged(err), undefined);
    const failure = controlFailure(err);
    assert.ok(failure, "the status carries a ControlFailure");
    assert.equal(failure.route, "/weight_checker");
    assert.deepEqual(failure.changed, ids.slice(0, 1));
    assert.deepEqual(failure.failed, ids.slice(1));
    assert.deepEqual(failure.results.map((r) => r.httpStatus), [200, 400, 400]);
    assert.equal(failure.results[0].body?.status, "reset");
  });

  it("reads the MembershipChanged of a stale epoch, which changes nothing", async () => {
    const { epoch } = await ctl.listWorkers({});
    const err = await rejection(ctl.pause({ mode: "keep", epoch: epoch + 1n }));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.equal(controlFailure(err), undefined);
    const stale = membershipChanged(err);
    assert.ok(stale, "the status carries a MembershipChanged");
    assert.equal(stale.epoch, epoch + 1n);
    assert.equal(stale.currentEpoch, epoch);
    assert.equal((await ctl.listWorkers({})).fleetPaused, false);
  });
});
