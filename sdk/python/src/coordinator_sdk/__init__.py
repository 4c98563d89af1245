"""A thin layer over the generated coordinator.v1 gRPC stubs.

The generated modules are the SDK: ``coordinator.v1.coordinator_pb2`` (messages)
and ``coordinator.v1.coordinator_pb2_grpc`` (``CoordinatorServiceStub``). This
module adds what every tokens client writes again: a channel with message
limits that fit long prompts, and the merge of a GenerateStream's TokensChunk
increments into one TokensResponse.

    import coordinator_sdk
    from coordinator.v1 import coordinator_pb2 as pb

    with coordinator_sdk.connect("127.0.0.1:9090") as client:
        resp = client.Generate(pb.GenerateRequest(tokens=pb.TokensRequest(
            model="sim-model", token_ids=[9906, 0],
            sampling=pb.SamplingParams(max_tokens=8, n=4, logprobs=0))))
        for choice in resp.tokens.choices:
            print(choice.index, list(choice.token_ids))

The RL control plane (coordinator.v1.ControlService, on the control
listener) is ``connect_control`` (control.py): pause, relabel and resume the
engines, with the bearer token on every call and ``ControlError`` carrying
the failure's details.
"""

from __future__ import annotations

from typing import Iterable

import grpc

from coordinator.v1 import coordinator_pb2 as pb
from coordinator.v1 import coordinator_pb2_grpc as pb_grpc
from coordinator_sdk.control import ControlClient, ControlError, connect_control, control_pb, control_pb_grpc

__all__ = [
    "Client", "ControlClient", "ControlError", "connect", "connect_control", "control_pb", "control_pb_grpc",
    "merge_tokens", "pb", "pb_grpc",
]

# MAX_MESSAGE_BYTES matches the coordinator's default body cap, so a long
# prompt or a large n is not cut by gRPC's 4 MiB default.
MAX_MESSAGE_BYTES = 64 << 20


class Client(pb_grpc.CoordinatorServiceStub):
    """A CoordinatorServiceStub that owns its channel (use it with ``with``)."""

    def __init__(self, channel: grpc.Channel):
        super().__init__(channel)
        self.channel = channel

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(address: str, *, credentials: grpc.ChannelCredentials | None = None) -> Client:
    """Opens a channel to the coordinator's gRPC port (plaintext without credentials)."""
    options = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ]
    if credentials is None:
        channel = grpc.insecure_channel(address, options=options)
    else:
        channel = grpc.secure_channel(address, credentials, options=options)
    return Client(channel)


def merge_tokens(stream: Iterable[pb.GenerateStreamResponse]) -> pb.TokensResponse:
    """Reads a tokens GenerateStream to its end and merges its chunks by choice index.

    The result is what Generate answers for the same request (without
    prompt_logprobs, which only Generate returns). Raises ValueError on a
    chunk that is not tokens, and grpc.RpcError when the stream fails.
    """
    out = pb.TokensResponse()
    by_index: dict[int, pb.TokensChoice] = {}
    for msg in stream:
        if msg.WhichOneof("chunk") != "tokens":
            raise ValueError(f"a {msg.WhichOneof('chunk')} chunk in a tokens stream")
        for ch in msg.tokens.choices:
            merged = by_index.get(ch.index)
            if merged is None:
                merged = by_index[ch.index] = pb.TokensChoice(index=ch.index)
            merged.token_ids.extend(ch.token_ids)
            merged.logprobs.extend(ch.logprobs)
            if ch.weight_versions:  # with the last chunk, covering the whole output
                del merged.weight_versions[:]
                merged.weight_versions.extend(ch.weight_versions)
            if ch.finish_reason != pb.FINISH_REASON_UNSPECIFIED:
                merged.finish_reason = ch.finish_reason
        if msg.tokens.HasField("usage"):
            out.usage.CopyFrom(msg.tokens.usage)
    out.choices.extend(by_index[i] for i in sorted(by_index))
    return out
