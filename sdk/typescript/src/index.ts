// A thin layer over the generated coordinator.v1 code (gen/, protoc-gen-es):
// a Connect client for CoordinatorService over the gRPC protocol (HTTP/2,
// plaintext or TLS) that owns its connection, and the merge of a
// GenerateStream's TokensChunk increments into one TokensResponse.
//
//	import { connect, create, GenerateRequestSchema } from "@coordinator-project/coordinator-sdk";
//
//	const client = connect("127.0.0.1:9090");
//	const resp = await client.generate(create(GenerateRequestSchema, {
//	  input: { case: "tokens", value: { model: "sim-model", tokenIds: [9906, 0],
//	    sampling: { maxTokens: 8, n: 4, logprobs: 0 } } },
//	}));
//	client.close();
//
// The RL control plane (ControlService, on the control listener) is
// connectControl (control.ts).

import { create } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import {
  CoordinatorService,
  FinishReason,
  TokensChoiceSchema,
  TokensResponseSchema,
  type GenerateStreamResponse,
  type TokensChoice,
  type TokensResponse,
} from "../gen/coordinator/v1/coordinator_pb.js";

export * from "../gen/coordinator/v1/coordinator_pb.js";
export * from "../gen/coordinator/v1/control_pb.js";
export { connectControl, controlFailure, membershipChanged, type ControlClient, type ControlOptions } from "./control.js";
export { create } from "@bufbuild/protobuf";
export { Code, ConnectError } from "@connectrpc/connect";

/** A CoordinatorService client that owns its HTTP/2 connection. */
export type CoordinatorClient = Client<typeof CoordinatorService> & {
  /** Closes the connection and every call still open on it. */
  close(): void;
};

/** Options of connect. */
export interface ConnectOptions {
  /** Timeout applied to every call that sets none, in milliseconds. */
  defaultTimeoutMs?: number;
}

/**
 * Returns a client for the coordinator's gRPC port. address is "host:port"
 * (plaintext HTTP/2) or a URL ("http://host:port", "https://host:port").
 */
export function connect(address: string, options: ConnectOptions = {}): CoordinatorClient {
  const baseUrl = address.includes("://") ? address : `http://${address}`;
  const sessionManager = new Http2SessionManager(baseUrl);
  const transport = createGrpcTransport({
    baseUrl,
    sessionManager,
    defaultTimeoutMs: options.defaultTimeoutMs,
  });
  const client = createClient(CoordinatorService, transport);
  return Object.assign(client, { close: () => sessionManager.abort() });
}

/**
 * Reads a tokens GenerateStream to its end and merges its chunks by choice
 * index: the result is what Generate answers for the same request (without
 * prompt logprobs, which only Generate returns). Throws on a chunk that is
 * not tokens, and with the call's ConnectError when the stream fails.
 */
export async function mergeTokens(
  stream: AsyncIterable<GenerateStreamResponse> | Iterable<GenerateStreamResponse>,
): Promise<TokensResponse> {
  const out = create(TokensResponseSchema);
  const byIndex = new Map<number, TokensChoice>();
  for await (const msg of stream) {
    if (msg.chunk.case !== "tokens") {
      throw new Error(`a ${msg.chunk.case ?? "empty"} chunk in a tokens stream`);
    }
    for (const ch of msg.chunk.value.choices) {
      let merged = byIndex.get(ch.index);
      if (merged === undefined) {
        merged = create(TokensChoiceSchema, { index: ch.index });
        byIndex.set(ch.index, merged);
      }
      merged.tokenIds.push(...ch.tokenIds);
      merged.logprobs.push(...ch.logprobs);
      mergeWeightVersions(merged, ch);
      if (ch.finishReason !== FinishReason.UNSPECIFIED) {
        merged.finishReason = ch.finishReason;
      }
    }
    if (msg.chunk.value.usage !== undefined) {
      out.usage = msg.chunk.value.usage;
    }
  }
  out.choices = [...byIndex.keys()].sort((a, b) => a - b).map((i) => byIndex.get(i)!);
  return out;
}

// mergeWeightVersions takes ch's weight-version spans into merged: they
// come with a choice's last chunk and cover its whole output.
function mergeWeightVersions(merged: TokensChoice, ch: TokensChoice): void {
  if (ch.weightVersions.length > 0) {
    merged.weightVersions = ch.weightVersions;
  }
}
