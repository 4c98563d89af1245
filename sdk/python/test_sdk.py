"""Tests the Python SDK against a live coordinator in front of coordinator-sim.

    COORDINATOR_GRPC_ADDR=127.0.0.1:9090 python3 sdk/python/test_sdk.py -v
    python3 sdk/python/test_sdk.py 127.0.0.1:9090 -v

The control plane's tests need the control listener too (`make run`:
COORDINATOR_CONTROL_ADDR=127.0.0.1:9091, no token), and the refusal test a
token (COORDINATOR_CONTROL_TOKEN). They pause, relabel and resume the whole
fleet: run them against a coordinator nobody else uses.

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
import time
import unittest
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

HERE = pathlib.Path(__file__).resolve().parent
try:
    import coordinator_sdk
except ImportError:  # running from a checkout: use the committed tree
    sys.path[:0] = [str(HERE / "gen"), str(HERE / "src")]
    import coordinator_sdk

import grpc
from coordinator.v1 import control_pb2 as control_pb
from coordinator.v1 import coordinator_pb2 as pb

FIXTURE = json.loads((HERE.parent / "testdata" / "sim.json").read_text())
ADDRESS = os.environ.get("COORDINATOR_GRPC_ADDR", "")
CONTROL_ADDRESS = os.environ.get("COORDINATOR_CONTROL_ADDR", "")
CONTROL_TOKEN = os.environ.get("COORDINATOR_CONTROL_TOKEN") or None
ROLES = ["decode", "encode", "prefill"]


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

    def test_conversation_round_trip(self) -> None:
        created = json.loads(self.client.CreateConversation(pb.CreateConversationRequest(
            json=b'{"items":[{"type":"message","role":"developer","content":"Be brief."}]}'), timeout=30).json)
        self.assertEqual("conversation", created["object"])
        conv = created["id"]
        body = {"model": "sim-model", "input": "Hello", "max_output_tokens": 4, "conversation": conv, "store": False}
        resp = self.client.Generate(pb.GenerateRequest(request_id=request_id(), openai=pb.OpenAIRequest(
            endpoint=pb.ENDPOINT_RESPONSES, json=json.dumps(body).encode())), timeout=30)
        self.assertEqual(200, resp.openai.status_code)
        answer = json.loads(resp.openai.json)
        items = json.loads(self.client.ListConversationItems(
            pb.ListConversationItemsRequest(id=conv, order="asc"), timeout=30).json)
        self.assertEqual(["developer", "user", "assistant"], [it.get("role") for it in items["data"]])
        self.assertEqual(answer["output"][0]["id"], items["last_id"])
        deleted = json.loads(self.client.DeleteConversation(pb.DeleteConversationRequest(id=conv), timeout=30).json)
        self.assertEqual({"id": conv, "object": "conversation.deleted", "deleted": True}, deleted)
        with self.assertRaises(grpc.RpcError) as caught:
            self.client.GetConversation(pb.GetConversationRequest(id=conv), timeout=30)
        self.assertEqual(grpc.StatusCode.NOT_FOUND, caught.exception.code())

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


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 30) -> None:
    """Polls cond until it holds; fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout}s")
        time.sleep(0.02)


class ControlPlaneTest(unittest.TestCase):
    """coordinator_sdk.connect_control against the control listener."""

    control: coordinator_sdk.ControlClient
    client: coordinator_sdk.Client

    @classmethod
    def setUpClass(cls) -> None:
        if not ADDRESS or not CONTROL_ADDRESS:
            raise unittest.SkipTest("set COORDINATOR_GRPC_ADDR and COORDINATOR_CONTROL_ADDR (sdk/run-tests.sh does)")
        cls.control = coordinator_sdk.connect_control(CONTROL_ADDRESS, token=CONTROL_TOKEN, timeout=30)
        cls.client = coordinator_sdk.connect(ADDRESS)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.control.close()
        cls.client.close()

    def setUp(self) -> None:
        # Every test starts and ends on a running fleet at v1.
        self.addCleanup(self.control.set_weight_version, "v1")
        self.addCleanup(self.control.resume)

    def test_list_workers(self) -> None:
        fleet = self.control.list_workers()
        self.assertGreater(fleet.epoch, 0)
        self.assertFalse(fleet.fleet_paused)
        self.assertEqual(0, fleet.held_requests)
        self.assertEqual(ROLES, [w.worker.role for w in fleet.workers], "one engine per role, sorted by id")
        for w in fleet.workers:
            self.assertTrue(w.reachable, w.error)
            self.assertEqual(f"{w.worker.role}/{w.worker.address}", w.worker.id)
            self.assertFalse(w.paused)
            self.assertEqual(1, w.world_size)
        decode = self.control.list_workers(role="decode")
        self.assertEqual(["decode"], [w.worker.role for w in decode.workers])

    def test_pause_keep_holds_generate_until_resume(self) -> None:
        fleet = self.control.list_workers()
        paused = self.control.pause("keep", epoch=fleet.epoch)
        self.assertEqual(fleet.epoch, paused.epoch)
        self.assertEqual([True] * 3, [r.ok for r in paused.results])
        state = self.control.list_workers()
        self.assertTrue(state.fleet_paused)
        self.assertEqual([True] * 3, [w.paused for w in state.workers])

        with ThreadPoolExecutor(1) as pool:
            rid = request_id()
            held = pool.submit(self.client.Generate, pb.GenerateRequest(request_id=rid, tokens=tokens_request()),
                               timeout=60)
            wait_for("the Generate held at admission", lambda: self.control.list_workers().held_requests == 1)
            self.assertFalse(held.done(), "a Generate sent during the pause waits for the resume")

            labelled = self.control.set_weight_version("v2", epoch=fleet.epoch)
            self.assertEqual([True] * 3, [r.ok for r in labelled.results])
            self.assertEqual(["v2"] * 3, [w.weight_version for w in self.control.list_workers().workers])
            self.assertFalse(held.done())

            try:
                resumed = self.control.resume(epoch=fleet.epoch)
            except BaseException:
                self.control.resume()  # let the held Generate go before the pool waits for it
                raise
            self.assertEqual(1, resumed.released_requests)
            resp = held.result(timeout=60)
        self.assertEqual(rid, resp.request_id)
        self.assertEqual(want(), view(resp.tokens))
        state = self.control.list_workers()
        self.assertFalse(state.fleet_paused)
        self.assertEqual([False] * 3, [w.paused for w in state.workers])

    def test_token_refused(self) -> None:
        if CONTROL_TOKEN is None:
            self.skipTest("set COORDINATOR_CONTROL_TOKEN (sdk/run-tests.sh does)")
        for name, token in {"no token": None, "a wrong token": CONTROL_TOKEN + "x"}.items():
            with self.subTest(name), coordinator_sdk.connect_control(CONTROL_ADDRESS, token=token, timeout=30) as c:
                with self.assertRaises(coordinator_sdk.ControlError) as caught:
                    c.list_workers()
                self.assertEqual(grpc.StatusCode.UNAUTHENTICATED, caught.exception.code())
                self.assertIsInstance(caught.exception, grpc.RpcError)
                with self.assertRaises(grpc.RpcError) as raw:
                    c.stub.Pause(control_pb.PauseRequest(mode="keep"), timeout=30)
                self.assertEqual(grpc.StatusCode.UNAUTHENTICATED, raw.exception.code())
        self.assertFalse(self.control.list_workers().fleet_paused, "a refused Pause paused nothing")
        # The raw stub of a client with the token sends it too.
        self.assertEqual(3, len(self.control.stub.ListWorkers(control_pb.ListWorkersRequest(), timeout=30).workers))

    def test_control_failure_detail(self) -> None:
        fleet = self.control.list_workers()
        decode = fleet.workers[0].worker.id
        with self.assertRaises(coordinator_sdk.ControlError) as caught:
            self.control.relay("weight_checker", body={"action": "nope"}, worker_bodies={decode: {"action": "reset"}})
        err = caught.exception
        self.assertEqual(grpc.StatusCode.UNAVAILABLE, err.code())
        self.assertIsNone(err.membership_changed)
        self.assertIsNotNone(err.failure)
        self.assertEqual("/weight_checker", err.failure.route)
        self.assertEqual([decode], list(err.failure.changed))
        self.assertEqual([w.worker.id for w in fleet.workers[1:]], list(err.failure.failed))
        self.assertEqual([200, 400, 400], [r.http_status for r in err.failure.results])
        self.assertEqual("reset", err.failure.results[0].body["status"])
        self.assertIn("checksum|reset|compare", err.failure.results[1].error)

    def test_stale_epoch_detail(self) -> None:
        epoch = self.control.list_workers().epoch
        with self.assertRaises(coordinator_sdk.ControlError) as caught:
            self.control.pause("keep", epoch=epoch + 1)
        err = caught.exception
        self.assertEqual(grpc.StatusCode.FAILED_PRECONDITION, err.code())
        self.assertIsNone(err.failure)
        self.assertIsNotNone(err.membership_changed)
        self.assertEqual(epoch + 1, err.membership_changed.epoch)
        self.assertEqual(epoch, err.membership_changed.current_epoch)
        self.assertEqual(0, len(err.membership_changed.added) + len(err.membership_changed.removed))
        state = self.control.list_workers()
        self.assertFalse(state.fleet_paused, "a call at a stale epoch changes nothing")
        self.assertEqual([False] * 3, [w.paused for w in state.workers])

    def test_abort_and_relay(self) -> None:
        aborted = self.control.abort(role="decode")
        self.assertEqual(["decode"], [r.worker.role for r in aborted.results])
        self.assertTrue(aborted.results[0].ok, aborted.results[0].error)
        self.assertEqual(0, aborted.results[0].body["aborted"])
        size = self.control.relay("get_world_size", query={"include_dp": "false"})
        self.assertEqual([1.0] * 3, [r.body["world_size"] for r in size.results])

    def test_invalid_argument(self) -> None:
        with self.assertRaises(coordinator_sdk.ControlError) as caught:
            self.control.pause("later")
        self.assertEqual(grpc.StatusCode.INVALID_ARGUMENT, caught.exception.code())
        self.assertIn("mode", caught.exception.details())
        with self.assertRaises(ValueError):
            self.control.pause("keep", role="decode", worker_id="decode/x")


class FakeRpcError(grpc.RpcError):
    """A failed call as grpcio raises it: code, details, trailers."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: tuple) -> None:
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return self._trailers


def field_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (payload under 128 bytes)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


class OfflineTest(unittest.TestCase):
    """What the SDK does without a coordinator."""

    def test_control_error_parses_status_details(self) -> None:
        failure = control_pb.ControlFailure(route="/pause", changed=["decode/a:1"], failed=["prefill/b:2"])
        detail = field_bytes(1, b"type.googleapis.com/coordinator.v1.ControlFailure") + \
            field_bytes(2, failure.SerializeToString())
        status = b"\x08\x0e" + field_bytes(2, b"/pause failed") + field_bytes(3, detail)
        err = coordinator_sdk.ControlError(FakeRpcError(
            grpc.StatusCode.UNAVAILABLE, "/pause failed", (("grpc-status-details-bin", status),)))
        self.assertEqual(grpc.StatusCode.UNAVAILABLE, err.code())
        self.assertEqual(failure, err.failure)
        self.assertIsNone(err.membership_changed)

    def test_control_error_without_details(self) -> None:
        for trailers in [(), (("grpc-status-details-bin", b"\xff\xff"),), None]:
            with self.subTest(trailers=trailers):
                err = coordinator_sdk.ControlError(FakeRpcError(grpc.StatusCode.INTERNAL, "boom", trailers))
                self.assertIsNone(err.failure)
                self.assertIsNone(err.membership_changed)
                self.assertEqual("INTERNAL: boom", str(err))

    def test_merge_tokens_keeps_weight_versions(self) -> None:
        spans = [pb.WeightVersionSpan(version="v1", start=0, count=2), pb.WeightVersionSpan(version="v2", start=2, count=1)]
        merged = coordinator_sdk.merge_tokens([
            pb.GenerateStreamResponse(tokens=pb.TokensChunk(choices=[pb.TokensChoice(index=0, token_ids=[1, 2])])),
            pb.GenerateStreamResponse(tokens=pb.TokensChunk(choices=[pb.TokensChoice(
                index=0, token_ids=[3], finish_reason=pb.FINISH_REASON_LENGTH, weight_versions=spans)])),
        ])
        self.assertEqual([1, 2, 3], list(merged.choices[0].token_ids))
        self.assertEqual(spans, list(merged.choices[0].weight_versions))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        ADDRESS = sys.argv.pop(1)
    unittest.main()
