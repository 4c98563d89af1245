#!/usr/bin/env python3
"""A GRPO-style rollout through the coordinator's gRPC tokens API.

For each prompt (token IDs, as a trainer holds them) it samples a group of
`n` completions in one Generate call, scores each with a toy reward (the
fraction of even token IDs), normalises the rewards within the group into
advantages, and prints the policy-gradient loss a trainer would minimise
(-mean(advantage * sequence logprob)). No tokenizer and no text: token IDs in,
token IDs and logprobs out.

    make run       # in another terminal: coordinator + simulator
    make rollout   # installs what is missing, then runs this file

or, with Debian's python3-grpcio and python3-protobuf installed, directly
with Debian's interpreter (a python3 earlier on PATH, such as a venv's or a
toolchain's, may lack grpc):

    /usr/bin/python3 examples/rl_rollout.py --addr 127.0.0.1:9090

Needs the Python SDK (sdk/python: installed, or found next to this file).
Exits non-zero when an answer is not what was asked for.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import uuid

try:
    import coordinator_sdk
except ImportError:  # running from a checkout: use the committed SDK tree
    sdk = pathlib.Path(__file__).resolve().parent.parent / "sdk" / "python"
    sys.path[:0] = [str(sdk / "gen"), str(sdk / "src")]
    import coordinator_sdk

from coordinator.v1 import coordinator_pb2 as pb

# Prompts as token IDs (cl100k_base: "Hello world", "2 + 2 =", a long-ID one).
PROMPTS = [
    [9906, 1917],
    [17, 489, 220, 17, 284],
    [100264, 882, 198, 4438, 527, 499, 30, 100265],
]


def reward(token_ids: list[int]) -> float:
    """The toy reward: the fraction of even token IDs."""
    return sum(1 for t in token_ids if t % 2 == 0) / len(token_ids) if token_ids else 0.0


def advantages(rewards: list[float], eps: float = 1e-6) -> list[float]:
    """GRPO's group-normalised advantages: (r - mean) / (std + eps)."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + eps) for r in rewards]


def rollout(client: coordinator_sdk.Client, model: str, prompt: list[int], n: int, max_tokens: int,
            seed: int, stream: bool) -> pb.TokensResponse:
    tokens = pb.TokensRequest(model=model, token_ids=prompt, sampling=pb.SamplingParams(
        max_tokens=max_tokens, n=n, temperature=1.0, seed=seed, logprobs=0))
    rid = "rl-" + uuid.uuid4().hex
    if stream:
        return coordinator_sdk.merge_tokens(client.GenerateStream(
            pb.GenerateStreamRequest(request_id=rid, tokens=tokens), timeout=60))
    return client.Generate(pb.GenerateRequest(request_id=rid, tokens=tokens), timeout=60).tokens


def check(resp: pb.TokensResponse, n: int, max_tokens: int) -> None:
    """Fails the run when the group is not what was asked for."""
    if len(resp.choices) != n:
        raise SystemExit(f"rl_rollout: {len(resp.choices)} choices, want {n}")
    for ch in resp.choices:
        if not ch.token_ids or len(ch.token_ids) > max_tokens:
            raise SystemExit(f"rl_rollout: choice {ch.index}: {len(ch.token_ids)} tokens, want 1..{max_tokens}")
        if [lp.token_id for lp in ch.logprobs] != list(ch.token_ids):
            raise SystemExit(f"rl_rollout: choice {ch.index}: logprobs do not match the token IDs")
        if any(not (lp.logprob <= 0) for lp in ch.logprobs):
            raise SystemExit(f"rl_rollout: choice {ch.index}: a logprob above 0")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", default="127.0.0.1:9090", help="coordinator gRPC address")
    ap.add_argument("--model", default="sim-model")
    ap.add_argument("--n", type=int, default=8, help="group size (samples per prompt)")
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--stream", action="store_true", help="use GenerateStream and merge its chunks")
    args = ap.parse_args()

    losses = []
    with coordinator_sdk.connect(args.addr) as client:
        for p, prompt in enumerate(PROMPTS):
            resp = rollout(client, args.model, prompt, args.n, args.max_tokens, args.seed + p, args.stream)
            check(resp, args.n, args.max_tokens)
            rewards = [reward(list(ch.token_ids)) for ch in resp.choices]
            advs = advantages(rewards)
            seq_logprobs = [sum(lp.logprob for lp in ch.logprobs) for ch in resp.choices]
            print(f"prompt {p} {prompt}: {len(resp.choices)} samples, usage {resp.usage.prompt_tokens}+"
                  f"{resp.usage.completion_tokens} tokens")
            for ch, r, a, s in zip(resp.choices, rewards, advs, seq_logprobs):
                lps = " ".join(f"{lp.logprob:.3f}" for lp in ch.logprobs)
                print(f"  sample {ch.index}: ids={list(ch.token_ids)}")
                print(f"           logprobs=[{lps}] seq_logprob={s:.3f} reward={r:.3f} advantage={a:+.3f}")
            if abs(sum(advs)) > 1e-3:
                raise SystemExit(f"rl_rollout: advantages of prompt {p} do not sum to 0: {sum(advs)}")
            losses.append(-sum(a * s for a, s in zip(advs, seq_logprobs)) / len(advs))
    print(f"policy-gradient loss over {len(PROMPTS)} groups: {sum(losses) / len(losses):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
