// The RL control plane: a Connect client of coordinator.v1.ControlService,
// served on the coordinator's control listener (control.listen_addr) behind
// an optional bearer token (control.token_file).
//
//	import { connectControl, controlFailure, membershipChanged } from "@coordinator-project/coordinator-sdk";
//
//	const ctl = connectControl("127.0.0.1:9091", { token });
//	const fleet = await ctl.listWorkers({});
//	await ctl.pause({ mode: "keep", epoch: fleet.epoch });
//	try {
//	  await ctl.setWeightVersion({ version: "v2", epoch: fleet.epoch });
//	} catch (err) {
//	  const failure = controlFailure(err); // some worker failed: Unavailable
//	  if (failure) console.log("changed", failure.changed, "failed", failure.failed);
//	  const stale = membershipChanged(err); // stale epoch: FailedPrecondition
//	  if (stale) console.log("added", stale.added, "removed", stale.removed);
//	  throw err;
//	} finally {
//	  await ctl.resume({});
//	}
//	ctl.close();

import type * as http2 from "node:http2";

import { ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import {
  ControlFailureSchema,
  ControlService,
  MembershipChangedSchema,
  type ControlFailure,
  type MembershipChanged,
} from "../gen/coordinator/v1/control_pb.js";

/** A ControlService client that owns its HTTP/2 connection. */
export type ControlClient = Client<typeof ControlService> & {
  /** Closes the connection and every call still open on it. */
  close(): void;
};

/** Options of connectControl. */
export interface ControlOptions {
  /** The control listener's bearer token (control.token_file), sent on every call. */
  token?: string;
  /** Timeout applied to every call that sets none, in milliseconds (a weight transfer may take minutes). */
  defaultTimeoutMs?: number;
  /** TLS options of an https:// address: ca, cert and key for mTLS, servername. */
  tls?: http2.SecureClientSessionOptions;
}

/**
 * Returns a client for the coordinator's control listener. address is
 * "host:port" (plaintext HTTP/2) or a URL ("http://host:port",
 * "https://host:port"). Calls fail with a ConnectError: Unauthenticated
 * without the right token; controlFailure and membershipChanged read its
 * details.
 */
export function connectControl(address: string, options: ControlOptions = {}): ControlClient {
  const baseUrl = address.includes("://") ? address : `http://${address}`;
  const sessionManager = new Http2SessionManager(baseUrl, undefined, options.tls);
  const interceptors: Interceptor[] = [];
  if (options.token) {
    interceptors.push(bearer(options.token));
  }
  const transport = createGrpcTransport({
    baseUrl,
    sessionManager,
    interceptors,
    defaultTimeoutMs: options.defaultTimeoutMs,
  });
  const client = createClient(ControlService, transport);
  return Object.assign(client, { close: () => sessionManager.abort() });
}

// bearer adds "authorization: Bearer <token>" to every call.
function bearer(token: string): Interceptor {
  const value = `Bearer ${token}`;
  return (next) => (req) => {
    req.header.set("authorization", value);
    return next(req);
  };
}

/**
 * The ControlFailure detail of a fan-out in which some worker failed
 * (Unavailable): every worker's result, which changed and which failed.
 * undefined when err does not carry one.
 */
export function controlFailure(err: unknown): ControlFailure | undefined {
  return err instanceof ConnectError ? err.findDetails(ControlFailureSchema)[0] : undefined;
}

/**
 * The MembershipChanged detail of a call that named a stale epoch
 * (FailedPrecondition; nothing changed: list the workers again). undefined
 * when err does not carry one.
 */
export function membershipChanged(err: unknown): MembershipChanged | undefined {
  return err instanceof ConnectError ? err.findDetails(MembershipChangedSchema)[0] : undefined;
}
