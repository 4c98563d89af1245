#!/usr/bin/env python3
"""An RL loop's weight update between rollouts, through the control plane.

A trainer streams rollouts (token IDs in, token IDs and logprobs out, over
GenerateStream) while it updates the policy. This example does the
coordinator's part of that:

  1. starts --rollouts streamed rollouts in threads and waits until each has
     its first tokens;
  2. while they stream, pauses the fleet with --mode "keep" (the requests in
     flight freeze; new ones wait at the coordinator's admission) or "abort"
     (the engines end the requests in flight; the coordinator holds each
     rollout's answer open and continues it after the resume: prompt and
     tokens so far, the budget left; docs/rl.md), labels
     the weights --version ("v2"; a real trainer transfers them first,
     through relay), and resumes, naming the epoch of one listing so that a
     worker added or removed meanwhile fails the calls instead of being
     missed;
  3. checks that every rollout in flight finished, none lost and none
     duplicated (one answer per rollout, each choice's tokens counted once:
     usage.completion_tokens is the sum of the choices' tokens); after an
     abort pause, that none ended "abort" and each has all --max-tokens;
  4. runs --rollouts more and checks they ran on the new weights: the
     weight_versions the coordinator reports per choice (all --version),
     and the workers' version in ListWorkers.

It prints a short summary and exits non-zero when a check fails; the fleet
is resumed whatever happens. It leaves the engines labelled --version.

    make run       # in another terminal: coordinator + simulator, control on :9091
    /usr/bin/python3 examples/rl_loop.py

or against another coordinator (sdk/run-tests.sh runs it so):

    /usr/bin/python3 examples/rl_loop.py --addr 127.0.0.1:9090 \\
        --control-addr 127.0.0.1:9091 --token "$(cat token)"

--addr, --control-addr and --token default to COORDINATOR_GRPC_ADDR,
COORDINATOR_CONTROL_ADDR and COORDINATOR_CONTROL_TOKEN, else to `make run`'s
127.0.0.1:9090, 127.0.0.1:9091 and no token. Needs the Python SDK
(sdk/python: installed, or found next to this file) and Debian's
python3-grpcio and python3-protobuf (use /usr/bin/python3).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

try:
    import coordinator_sdk
except ImportError:  # running from a checkout: use the committed SDK tree
    sdk = pathlib.Path(__file__).resolve().parent.parent / "sdk" / "python"
    sys.path[:0] = [str(sdk / "gen"), str(sdk / "src")]
    import coordinator_sdk

import grpc
from coordinator.v1 import coordinator_pb2 as pb

# Prompts as token IDs (cl100k_base: "Hello world", "2 + 2 =").
PROMPTS = [[9906, 1917], [17, 489, 220, 17, 284]]


class CheckFailed(Exception):
    """A check of the loop failed."""


@dataclass
class Rollout:
    """One streamed rollout: its id, whether its first tokens came, its answer."""

    request_id: str
    started: threading.Event = field(default_factory=threading.Event)
    chunks: int = 0
    future: Future | None = None


def stream_rollout(client: coordinator_sdk.Client, r: Rollout, req: pb.TokensRequest) -> pb.TokensResponse:
    """Streams one rollout to its end, setting r.started at its first chunk."""

    def chunks():
        try:
            for msg in client.GenerateStream(pb.GenerateStreamRequest(request_id=r.request_id, tokens=req),
                                             timeout=300):
                r.chunks += 1
                r.started.set()
                yield msg
        finally:
            r.started.set()  # a failed stream must not leave the loop waiting

    return coordinator_sdk.merge_tokens(chunks())


def start(pool: ThreadPoolExecutor, client: coordinator_sdk.Client, args: argparse.Namespace,
          count: int, seed: int) -> list[Rollout]:
    rollouts = []
    for i in range(count):
        req = pb.TokensRequest(model=args.model, token_ids=PROMPTS[i % len(PROMPTS)], sampling=pb.SamplingParams(
            max_tokens=args.max_tokens, n=args.n, temperature=1.0, seed=seed + i, logprobs=0,
            ignore_eos=args.ignore_eos))
        r = Rollout(request_id="rl-loop-" + uuid.uuid4().hex)
        r.future = pool.submit(stream_rollout, client, r, req)
        rollouts.append(r)
    return rollouts


def spans(ch: pb.TokensChoice) -> list[tuple[str, int]]:
    """The choice's weight versions as (version, token count) runs."""
    return [(s.version, s.count) for s in ch.weight_versions]


def check_rollout(r: Rollout, resp: pb.TokensResponse, n: int, max_tokens: int, whole: bool) -> None:
    """Fails when the answer is not one whole rollout of n choices (whole:
    each of max_tokens tokens, not aborted)."""
    where = f"rollout {r.request_id}"
    if [ch.index for ch in resp.choices] != list(range(n)):
        raise CheckFailed(f"{where}: choices {[ch.index for ch in resp.choices]}, want 0..{n - 1}")
    total = 0
    for ch in resp.choices:
        if ch.finish_reason == pb.FINISH_REASON_UNSPECIFIED:
            raise CheckFailed(f"{where}: choice {ch.index} did not finish")
        if not 0 < len(ch.token_ids) <= max_tokens:
            raise CheckFailed(f"{where}: choice {ch.index}: {len(ch.token_ids)} tokens, want 1..{max_tokens}")
        if whole and (ch.finish_reason == pb.FINISH_REASON_ABORT or len(ch.token_ids) != max_tokens):
            raise CheckFailed(f"{where}: choice {ch.index}: {pb.FinishReason.Name(ch.finish_reason)} after "
                              f"{len(ch.token_ids)} tokens, want all {max_tokens} (continued across the pause)")
        if [lp.token_id for lp in ch.logprobs] != list(ch.token_ids):
            raise CheckFailed(f"{where}: choice {ch.index}: logprobs do not match the token IDs")
        runs = spans(ch)
        if runs and sum(c for _, c in runs) != len(ch.token_ids):
            raise CheckFailed(f"{where}: choice {ch.index}: weight_versions cover {sum(c for _, c in runs)} "
                              f"of {len(ch.token_ids)} tokens")
        total += len(ch.token_ids)
    if resp.usage.completion_tokens != total:
        raise CheckFailed(f"{where}: usage says {resp.usage.completion_tokens} completion tokens, "
                          f"the choices hold {total} (lost or duplicated)")


def finish(rollouts: list[Rollout], args: argparse.Namespace) -> list[pb.TokensResponse]:
    """Waits for every rollout and checks it: none lost, none duplicated."""
    out = []
    for r in rollouts:
        resp = r.future.result(timeout=300)
        check_rollout(r, resp, args.n, args.max_tokens, args.ignore_eos)
        out.append(resp)
    ids = [r.request_id for r in rollouts]
    if len(set(ids)) != len(ids) or len(out) != len(rollouts):
        raise CheckFailed(f"{len(out)} answers for {len(set(ids))} rollouts")
    return out


def versions(ctl: coordinator_sdk.ControlClient) -> dict[str, str]:
    """Each worker's weight version, by id; fails on an unreachable worker."""
    fleet = ctl.list_workers()
    bad = [f"{w.worker.id}: {w.error}" for w in fleet.workers if not w.reachable]
    if bad:
        raise CheckFailed(f"unreachable workers: {bad}")
    return {w.worker.id: w.weight_version for w in fleet.workers}


def update_weights(ctl: coordinator_sdk.ControlClient, version: str, mode: str) -> tuple[int, int]:
    """Pause (mode), label version, resume, at one epoch; returns the epoch
    and how many requests were held at admission meanwhile."""
    fleet = ctl.list_workers()
    if not fleet.workers:
        raise CheckFailed("the control plane lists no workers")
    ctl.pause(mode, epoch=fleet.epoch)
    try:
        paused = ctl.list_workers()
        if not paused.fleet_paused or not all(w.paused for w in paused.workers):
            raise CheckFailed(f"after pause: fleet_paused={paused.fleet_paused}, "
                              f"paused={[w.worker.id for w in paused.workers if w.paused]}")
        # A trainer moves the new weights here (relay: start_weight_update,
        # update_weights), then names them.
        ctl.set_weight_version(version, epoch=fleet.epoch)
        labelled = versions(ctl)
        if set(labelled.values()) != {version}:
            raise CheckFailed(f"after set_weight_version: {labelled}")
    finally:
        resumed = ctl.resume(epoch=fleet.epoch)
    state = ctl.list_workers()
    if state.fleet_paused or any(w.paused for w in state.workers):
        raise CheckFailed("after resume: the fleet is still paused")
    return fleet.epoch, resumed.released_requests


def check_new_weights(ctl: coordinator_sdk.ControlClient, answers: list[pb.TokensResponse], version: str) -> str:
    """Checks the rollouts after the resume ran on version; says how."""
    reported = [spans(ch) for resp in answers for ch in resp.choices]
    stale = [runs for runs in reported if not runs or {v for v, _ in runs} != {version}]
    if stale:
        raise CheckFailed(f"rollouts after the resume report weight versions {stale[:4]}, want {version}")
    labelled = versions(ctl)
    if set(labelled.values()) != {version}:
        raise CheckFailed(f"after the loop the workers report {labelled}, want {version}")
    return f"every choice reports {version} (weight_versions), as every worker does (ListWorkers)"


def summary(name: str, rollouts: list[Rollout], answers: list[pb.TokensResponse]) -> str:
    tokens = sum(resp.usage.completion_tokens for resp in answers)
    runs: dict[str, int] = {}
    for resp in answers:
        for ch in resp.choices:
            key = "+".join(v for v, _ in spans(ch)) or "-"
            runs[key] = runs.get(key, 0) + 1
    return (f"{name}: {len(rollouts)} rollouts, {len(answers)} finished (0 lost, 0 duplicated), "
            f"{sum(len(a.choices) for a in answers)} samples, {tokens} tokens, "
            f"{sum(r.chunks for r in rollouts)} chunks; samples by weight versions {runs}")


def run(args: argparse.Namespace) -> None:
    with coordinator_sdk.connect(args.addr) as client, \
            coordinator_sdk.connect_control(args.control_addr, token=args.token, timeout=60) as ctl, \
            ThreadPoolExecutor(args.rollouts) as pool:
        print(f"workers before: {versions(ctl)}")
        first = start(pool, client, args, args.rollouts, args.seed)
        for r in first:
            if not r.started.wait(timeout=120):
                raise CheckFailed(f"rollout {r.request_id}: no tokens after 120s")
        epoch, held = update_weights(ctl, args.version, args.mode)
        in_flight = sum(1 for r in first if not r.future.done())
        print(f"paused ({args.mode}), labelled {args.version} and resumed at epoch {epoch}: "
              f"{in_flight} of {len(first)} rollouts were still streaming, {held} requests held at admission")
        answers = finish(first, args)
        print(summary("across the update", first, answers))

        second = start(pool, client, args, args.rollouts, args.seed + args.rollouts)
        after = finish(second, args)
        print(summary("after the update", second, after))
        print(f"new weights: {check_new_weights(ctl, after, args.version)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", default=os.environ.get("COORDINATOR_GRPC_ADDR", "127.0.0.1:9090"),
                    help="coordinator gRPC address (env COORDINATOR_GRPC_ADDR)")
    ap.add_argument("--control-addr", default=os.environ.get("COORDINATOR_CONTROL_ADDR", "127.0.0.1:9091"),
                    help="control listener address (env COORDINATOR_CONTROL_ADDR)")
    ap.add_argument("--token", default=os.environ.get("COORDINATOR_CONTROL_TOKEN") or None,
                    help="control bearer token (env COORDINATOR_CONTROL_TOKEN; default none)")
    ap.add_argument("--model", default="sim-model")
    ap.add_argument("--rollouts", type=int, default=8, help="rollouts per phase, streamed at once")
    ap.add_argument("--n", type=int, default=2, help="samples per rollout")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--version", default="v2", help="the weight version to label")
    ap.add_argument("--mode", choices=["keep", "abort"], default="keep",
                    help="the pause's mode (abort: the rollouts are continued, which takes --n 1)")
    args = ap.parse_args()
    if args.rollouts < 1 or args.n < 1 or args.max_tokens < 1:
        ap.error("--rollouts, --n and --max-tokens must be at least 1")
    if args.mode == "abort" and args.n != 1:
        ap.error("--mode abort continues rollouts of one sample: use --n 1")
    # An aborted rollout is continued to its whole budget: ask for it.
    args.ignore_eos = args.mode == "abort"
    try:
        run(args)
    except CheckFailed as err:
        print(f"rl_loop: {err}", file=sys.stderr)
        return 1
    except grpc.RpcError as err:  # a rollout's or a control call's (ControlError)
        print(f"rl_loop: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
