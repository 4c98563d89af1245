"""The RL control plane: a client of coordinator.v1.ControlService.

The coordinator serves ControlService on its control listener
(control.listen_addr), behind an optional bearer token (control.token_file).
``connect_control`` opens a channel to it that sends the token as
``authorization`` metadata on every call (the helpers' and the raw stub's);
the helpers build the requests from plain values and raise ``ControlError``,
which carries the failure's details parsed from the status:

    import coordinator_sdk

    with coordinator_sdk.connect_control("127.0.0.1:9091", token="...") as ctl:
        fleet = ctl.list_workers()
        ctl.pause("keep", epoch=fleet.epoch)
        try:
            ctl.set_weight_version("v2", epoch=fleet.epoch)
        except coordinator_sdk.ControlError as err:
            if err.failure is not None:  # some worker failed: UNAVAILABLE
                print("changed", list(err.failure.changed), "failed", list(err.failure.failed))
            if err.membership_changed is not None:  # stale epoch: FAILED_PRECONDITION
                print("added", list(err.membership_changed.added))
            raise
        finally:
            ctl.resume()
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Mapping, Sequence, TypeVar

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, struct_pb2
from google.protobuf.message import DecodeError, Message

from coordinator.v1 import control_pb2 as control_pb
from coordinator.v1 import control_pb2_grpc as control_pb_grpc

__all__ = ["ControlClient", "ControlError", "connect_control", "control_pb", "control_pb_grpc"]

# STATUS_DETAILS_KEY is the trailer holding the serialized google.rpc.Status.
STATUS_DETAILS_KEY = "grpc-status-details-bin"


def _status_class() -> type[Message]:
    """google.rpc.Status, built in a private descriptor pool.

    Debian's python3-grpcio ships neither grpc_status nor google.rpc, so the
    SDK declares the message itself, with details as raw bytes (the wire form
    of each google.protobuf.Any): a private pool cannot clash with
    googleapis-common-protos' copy when both are loaded.
    """
    fd = descriptor_pb2.FileDescriptorProto(
        name="coordinator_sdk/google_rpc_status.proto", package="google.rpc", syntax="proto3")
    msg = fd.message_type.add(name="Status")
    field = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="code", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    msg.field.add(name="message", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    msg.field.add(name="details", number=3, type=field.TYPE_BYTES, label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("google.rpc.Status")
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get_class is not None:
        return get_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


_Status = _status_class()


def status_details(trailing_metadata: Sequence[tuple[str, Any]] | None) -> list[any_pb2.Any]:
    """The details of the google.rpc.Status in a call's trailers; [] when none."""
    for key, value in trailing_metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                return [any_pb2.Any.FromString(d) for d in _Status.FromString(value).details]
            except DecodeError:
                return []
    return []


M = TypeVar("M", bound=Message)


def _find_detail(details: Sequence[any_pb2.Any], cls: type[M]) -> M | None:
    for d in details:
        if d.type_url.rsplit("/", 1)[-1] == cls.DESCRIPTOR.full_name:
            return cls.FromString(d.value)
    return None


class ControlError(grpc.RpcError):
    """A failed control call: the grpc.RpcError's code and details, and its
    typed details.

    ``failure`` is the ControlFailure of a fan-out in which some worker
    failed (UNAVAILABLE): every worker's result, which changed and which
    failed. ``membership_changed`` is the MembershipChanged of a call that
    named a stale epoch (FAILED_PRECONDITION): nothing changed, list the
    workers again. Either is None when the status does not carry it.
    """

    def __init__(self, err: grpc.RpcError):
        super().__init__(str(err))
        self.cause = err
        self._code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        self._details = err.details() if hasattr(err, "details") else str(err)
        self._trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
        self.status_details = status_details(self._trailers)
        self.failure = _find_detail(self.status_details, control_pb.ControlFailure)
        self.membership_changed = _find_detail(self.status_details, control_pb.MembershipChanged)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self):
        return self._trailers

    def __str__(self) -> str:
        return f"{self._code.name}: {self._details}"


class _CallDetails(
        collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials",
                                                "wait_for_ready", "compression")),
        grpc.ClientCallDetails):
    """A call's details with metadata replaced (grpc's own type is private)."""


class _BearerToken(grpc.UnaryUnaryClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every unary call (every
    ControlService RPC is unary)."""

    def __init__(self, token: str):
        self._header = ("authorization", "Bearer " + token)

    def intercept_unary_unary(self, continuation, details, request):
        metadata = [*(details.metadata or ()), self._header]
        return continuation(_CallDetails(
            details.method, details.timeout, metadata, details.credentials,
            getattr(details, "wait_for_ready", None), getattr(details, "compression", None)), request)


def _target(role: str | None, worker_id: str | None) -> control_pb.Target | None:
    """The Target of one role or one worker; None (every worker) for neither."""
    if role is not None and worker_id is not None:
        raise ValueError("target: give role or worker_id, not both")
    if role is not None:
        return control_pb.Target(role=role)
    if worker_id is not None:
        return control_pb.Target(worker_id=worker_id)
    return None


def _struct(body: Mapping[str, Any] | struct_pb2.Struct) -> struct_pb2.Struct:
    if isinstance(body, struct_pb2.Struct):
        return body
    out = struct_pb2.Struct()
    out.update(body)
    return out


class ControlClient:
    """A ControlService client that owns its channel (use it with ``with``).

    Every helper takes ``role`` ("encode", "prefill", "decode") or
    ``worker_id`` (as list_workers gives it) to target some workers instead
    of all, and ``epoch`` (from list_workers) to fail with
    FAILED_PRECONDITION instead of missing a worker added or removed since;
    it returns the response message and raises ControlError. ``stub`` is the
    generated ControlServiceStub on the same channel (the token included).
    """

    def __init__(self, channel: grpc.Channel, *, timeout: float | None = None):
        self.channel = channel
        self.stub = control_pb_grpc.ControlServiceStub(channel)
        self.timeout = timeout

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, rpc: Callable[..., M], request: Message) -> M:
        try:
            return rpc(request, timeout=self.timeout)
        except grpc.RpcError as err:
            raise ControlError(err) from err

    def list_workers(self, *, role: str | None = None,
                     worker_id: str | None = None) -> control_pb.ListWorkersResponse:
        """The membership's epoch and every targeted engine's state."""
        return self._call(self.stub.ListWorkers, control_pb.ListWorkersRequest(target=_target(role, worker_id)))

    def pause(self, mode: str = "abort", epoch: int | None = None, *, role: str | None = None,
              worker_id: str | None = None) -> control_pb.PauseResponse:
        """Pauses the engines ("abort", "wait" or "keep" their requests in
        flight); new inference requests wait at admission until resume."""
        return self._call(self.stub.Pause, control_pb.PauseRequest(
            target=_target(role, worker_id), epoch=epoch, mode=mode))

    def resume(self, epoch: int | None = None, *, role: str | None = None,
               worker_id: str | None = None) -> control_pb.ResumeResponse:
        """Resumes the engines; released_requests is how many held requests ran."""
        return self._call(self.stub.Resume, control_pb.ResumeRequest(target=_target(role, worker_id), epoch=epoch))

    def set_weight_version(self, version: str, epoch: int | None = None, finish_update: bool = False, *,
                           role: str | None = None,
                           worker_id: str | None = None) -> control_pb.SetWeightVersionResponse:
        """Labels the engines' weights version (finish_update: ends a weight
        update started through relay)."""
        return self._call(self.stub.SetWeightVersion, control_pb.SetWeightVersionRequest(
            target=_target(role, worker_id), epoch=epoch, version=version, finish_update=finish_update))

    def abort(self, request_ids: Sequence[str] = (), epoch: int | None = None, *, role: str | None = None,
              worker_id: str | None = None) -> control_pb.AbortRequestsResponse:
        """Aborts the requests of these client ids, or every request when none is given."""
        return self._call(self.stub.AbortRequests, control_pb.AbortRequestsRequest(
            target=_target(role, worker_id), epoch=epoch, request_ids=list(request_ids)))

    def relay(self, route: str, body: Mapping[str, Any] | None = None,
              worker_bodies: Mapping[str, Mapping[str, Any]] | None = None,
              query: Mapping[str, str] | None = None, epoch: int | None = None, *,
              role: str | None = None, worker_id: str | None = None) -> control_pb.RelayResponse:
        """Calls an engine route (e.g. "init_weight_transfer_engine") with one
        JSON body for all, or a body per worker id."""
        req = control_pb.RelayRequest(route=route, target=_target(role, worker_id), epoch=epoch,
                                      query=dict(query or {}))
        if body is not None:
            req.body.CopyFrom(_struct(body))
        for wid, wbody in (worker_bodies or {}).items():
            req.worker_bodies[wid].CopyFrom(_struct(wbody))
        return self._call(self.stub.Relay, req)


def connect_control(target: str, token: str | None = None, credentials: grpc.ChannelCredentials | None = None,
                    *, timeout: float | None = None) -> ControlClient:
    """Opens a channel to the coordinator's control listener (plaintext
    without credentials) that sends ``authorization: Bearer <token>`` on
    every call when token is set. timeout (seconds) bounds each helper's
    call; a weight transfer through relay may take minutes."""
    if credentials is None:
        channel = grpc.insecure_channel(target)
    else:
        channel = grpc.secure_channel(target, credentials)
    if token:
        channel = grpc.intercept_channel(channel, _BearerToken(token))
    return ControlClient(channel, timeout=timeout)
