"""Tests the Python SDK against a live coordinator in front of coordinator-sim.

    COORDINATOR_GRPC_ADDR=127.0.0.1:9090 python3 sdk/python/test_sdk.py -v
    python3 sdk/python/test_sdk.py 127.0.0.1:9090 -v

sdk/run-tests.sh starts the simulator and the coordinator and runs this. The
expected token IDs and logprobs are sdk/testdata/sim.json, which
`go test ./sdk` keeps equal to what package sim computes.
"""

from __future__ import annotations

import json
import os
import pathlib
import struct
import sys
import unittest
import uuid

HERE = pathlib.Path(__file__).resolve().parent
try:
    import coordinator_sdk
except ImportError:  # running from a checkout: use the committed tree
    sys.path[:0] = [str(HERE / "gen"), str(HERE / "src")]
    import coordinator_sdk

import grpc
from coordinator.v1 import coordinator_pb2 as pb

FIXTURE = json.loads((HERE.parent / "testdata" / "sim.json").read_text())
ADDRESS = os.environ.get("COORDINATOR_GRPC_ADDR", "")


def f32(x: float) -> float:
    """x rounded to float32, as a proto float field carries it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def request_id() -> str:
    # The strict simulator wants a fresh id per request.
    return "sdk-py-" + uuid.uuid4().hex


def tokens_request() -> pb.TokensRequest:
    c = FIXTURE["tokens"]
    return pb.TokensRequest(
        model=c["model"],
        token_ids=c["prompt"],
        sampling=pb.SamplingParams(
            max_tokens=c["max_tokens"], n=c["n"], logprobs=c["logprobs"],
            temperature=c["temperature"], seed=c["seed"]),
    )


def view(resp: pb.TokensResponse) -> list[dict]:
    """The choices as plain values, in the fixture's shape."""
    return [{
        "index": ch.index,
        "token_ids": list(ch.token_ids),
        "logprob_ids": [lp.token_id for lp in ch.logprobs],
        "logprobs": [lp.logprob for lp in ch.logprobs],
        "top_logprobs": [[{"token_id": t.token_id, "logprob": t.logprob} for t in lp.top_logprobs]
                         for lp in ch.logprobs],
        "finish_reason": pb.FinishReason.Name(ch.finish_reason),
    } for ch in resp.choices]


def want() -> list[dict]:
    return [{
        "index": ch["index"],
        "token_ids": ch["token_ids"],
        "logprob_ids": ch["token_ids"],
        "logprobs": [f32(x) for x in ch["logprobs"]],
        "top_logprobs": [[{"token_id": t["token_id"], "logprob": f32(t["logprob"])} for t in top]
                         for top in ch["top_logprobs"]],
        "finish_reason": ch["finish_reason"],
    } for ch in FIXTURE["tokens"]["choices"]]


class CoordinatorSDKTest(unittest.TestCase):
    client: coordinator_sdk.Client

    @classmethod
    def setUpClass(cls) -> None:
        if not ADDRESS:
            raise unittest.SkipTest("set COORDINATOR_GRPC_ADDR (sdk/run-tests.sh does)")
        cls.client = coordinator_sdk.connect(ADDRESS)
        grpc.channel_ready_future(cls.client.channel).result(timeout=10)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()

    def generate_tokens(self) -> pb.GenerateResponse:
        rid = request_id()
        resp = self.client.Generate(pb.GenerateRequest(request_id=rid, tokens=tokens_request()), timeout=30)
        self.assertEqual(rid, resp.request_id)
        self.assertEqual("tokens", resp.WhichOneof("output"))
        return resp

    def test_tokens_generate_exact_and_deterministic(self) -> None:
        first = self.generate_tokens()
        self.assertEqual(want(), view(first.tokens))
        u = FIXTURE["tokens"]["usage"]
        self.assertEqual(pb.Usage(**u), first.tokens.usage)
        self.assertEqual(0, len(first.tokens.prompt_logprobs))
        # The second run of the prompt takes the conditional-decode path
        # (the simulator's decode pool has seen it) and must answer the same.
        second = self.generate_tokens()
        self.assertEqual(view(first.tokens), view(second.tokens))
        self.assertEqual(first.tokens.usage, second.tokens.usage)

    def test_tokens_stream_matches_generate(self) -> None:
        stream = self.client.GenerateStream(
            pb.GenerateStreamRequest(request_id=request_id(), tokens=tokens_request()), timeout=30)
        chunks = list(stream)
        self.assertGreater(len(chunks), 1, "the answer streams in increments")
        with_usage = [i for i, c in enumerate(chunks) if c.tokens.HasField("usage")]
        self.assertEqual([len(chunks) - 1], with_usage, "usage comes with the last chunk only")
        streamed = coordinator_sdk.merge_tokens(chunks)
        self.assertEqual(want(), view(streamed))
        self.assertEqual(view(self.generate_tokens().tokens), view(streamed))
        self.assertEqual(pb.Usage(**FIXTURE["tokens"]["usage"]), streamed.usage)

    def test_openai_chat_generate(self) -> None:
        c = FIXTURE["chat"]
        body = {"model": c["model"], "max_tokens": c["max_tokens"],
                "messages": [{"role": "user", "content": c["message"]}]}
        rid = request_id()
        resp = self.client.Generate(pb.GenerateRequest(request_id=rid, openai=pb.OpenAIRequest(
            endpoint=pb.ENDPOINT_CHAT_COMPLETIONS, json=json.dumps(body).encode())), timeout=30)
        self.assertEqual(rid, resp.request_id)
        self.assertEqual(200, resp.openai.status_code)
        self.assertTrue(resp.openai.content_type.startswith("application/json"), resp.openai.content_type)
        answer = json.loads(resp.openai.json)
        self.assertEqual("chat.completion", answer["object"])
        self.assertEqual(c["content"], answer["choices"][0]["message"]["content"])
        self.assertEqual("length", answer["choices"][0]["finish_reason"])
        self.assertEqual(c["max_tokens"], answer["usage"]["completion_tokens"])

    def test_openai_chat_stream(self) -> None:
        c = FIXTURE["chat"]
        body = {"model": c["model"], "max_tokens": c["max_tokens"], "stream": True,
                "messages": [{"role": "user", "content": c["message"]}]}
        stream = self.client.GenerateStream(pb.GenerateStreamRequest(request_id=request_id(), openai=pb.OpenAIRequest(
            endpoint=pb.ENDPOINT_CHAT_COMPLETIONS, json=json.dumps(body).encode())), timeout=30)
        events = [data for msg in stream for data in msg.openai.data]
        self.assertEqual(b"[DONE]", events[-1])
        content = "".join(ch["delta"].get("content") or ""
                          for e in events[:-1] for ch in json.loads(e)["choices"])
        self.assertEqual(c["content"], content)

    def test_responses_stream_typed_events(self) -> None:
        body = {"model": "sim-model", "input": "Hello", "max_output_tokens": 4, "stream": True}
        stream = self.client.GenerateStream(pb.GenerateStreamRequest(request_id=request_id(), openai=pb.OpenAIRequest(
            endpoint=pb.ENDPOINT_RESPONSES, json=json.dumps(body).encode())), timeout=30)
        names = []
        for msg in stream:
            self.assertEqual(len(msg.openai.event), len(msg.openai.data), "every event's type travels with it")
            for name, data in zip(msg.openai.event, msg.openai.data):
                self.assertEqual(name, json.loads(data)["type"])
                names.append(name)
        self.assertEqual("response.created", names[0])
        self.assertEqual("response.completed", names[-1])
        self.assertEqual(4, names.count("response.output_text.delta"))

    def test_invalid_argument_names_the_field(self) -> None:
        cases = {
            "tokens.token_ids": pb.TokensRequest(model="sim-model"),
            "tokens.sampling.top_p": pb.TokensRequest(
                model="sim-model", token_ids=[1, 2], sampling=pb.SamplingParams(top_p=0)),
        }
        for field, tokens in cases.items():
            with self.subTest(field=field):
                with self.assertRaises(grpc.RpcError) as caught:
                    self.client.Generate(pb.GenerateRequest(request_id=request_id(), tokens=tokens), timeout=30)
                self.assertEqual(grpc.StatusCode.INVALID_ARGUMENT, caught.exception.code())
                self.assertIn(field, caught.exception.details())

    def test_stream_prompt_logprobs_rejected(self) -> None:
        tokens = tokens_request()
        tokens.sampling.prompt_logprobs = 0
        stream = self.client.GenerateStream(pb.GenerateStreamRequest(request_id=request_id(), tokens=tokens), timeout=30)
        with self.assertRaises(grpc.RpcError) as caught:
            list(stream)
        self.assertEqual(grpc.StatusCode.INVALID_ARGUMENT, caught.exception.code())
        self.assertIn("prompt_logprobs", caught.exception.details())


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        ADDRESS = sys.argv.pop(1)
    unittest.main()
