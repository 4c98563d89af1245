from buf.validate import validate_pb2 as _validate_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AbortRequestsRequest(_message.Message):
    __slots__ = ["epoch", "request_ids", "target"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    request_ids: _containers.RepeatedScalarFieldContainer[str]
    target: Target
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., epoch: _Optional[int] = ..., request_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class AbortRequestsResponse(_message.Message):
    __slots__ = ["epoch", "results"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    results: _containers.RepeatedCompositeFieldContainer[WorkerResult]
    def __init__(self, epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[WorkerResult, _Mapping]]] = ...) -> None: ...

class ControlFailure(_message.Message):
    __slots__ = ["changed", "failed", "results", "route"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    changed: _containers.RepeatedScalarFieldContainer[str]
    failed: _containers.RepeatedScalarFieldContainer[str]
    results: _containers.RepeatedCompositeFieldContainer[WorkerResult]
    route: str
    def __init__(self, route: _Optional[str] = ..., results: _Optional[_Iterable[_Union[WorkerResult, _Mapping]]] = ..., changed: _Optional[_Iterable[str]] = ..., failed: _Optional[_Iterable[str]] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ["target"]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: Target
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ["epoch", "fleet_paused", "held_requests", "workers"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FLEET_PAUSED_FIELD_NUMBER: _ClassVar[int]
    HELD_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    fleet_paused: bool
    held_requests: int
    workers: _containers.RepeatedCompositeFieldContainer[WorkerState]
    def __init__(self, epoch: _Optional[int] = ..., workers: _Optional[_Iterable[_Union[WorkerState, _Mapping]]] = ..., fleet_paused: bool = ..., held_requests: _Optional[int] = ...) -> None: ...

class MembershipChanged(_message.Message):
    __slots__ = ["added", "current_epoch", "epoch", "removed"]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    added: _containers.RepeatedCompositeFieldContainer[Worker]
    current_epoch: int
    epoch: int
    removed: _containers.RepeatedCompositeFieldContainer[Worker]
    def __init__(self, epoch: _Optional[int] = ..., current_epoch: _Optional[int] = ..., added: _Optional[_Iterable[_Union[Worker, _Mapping]]] = ..., removed: _Optional[_Iterable[_Union[Worker, _Mapping]]] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ["epoch", "mode", "target"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    mode: str
    target: Target
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., epoch: _Optional[int] = ..., mode: _Optional[str] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ["epoch", "results"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    results: _containers.RepeatedCompositeFieldContainer[WorkerResult]
    def __init__(self, epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[WorkerResult, _Mapping]]] = ...) -> None: ...

class RelayRequest(_message.Message):
    __slots__ = ["body", "epoch", "query", "route", "target", "worker_bodies"]
    class QueryEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class WorkerBodiesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Struct
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
    BODY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WORKER_BODIES_FIELD_NUMBER: _ClassVar[int]
    body: _struct_pb2.Struct
    epoch: int
    query: _containers.ScalarMap[str, str]
    route: str
    target: Target
    worker_bodies: _containers.MessageMap[str, _struct_pb2.Struct]
    def __init__(self, route: _Optional[str] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., epoch: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., worker_bodies: _Optional[_Mapping[str, _struct_pb2.Struct]] = ..., query: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RelayResponse(_message.Message):
    __slots__ = ["epoch", "results"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    results: _containers.RepeatedCompositeFieldContainer[WorkerResult]
    def __init__(self, epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[WorkerResult, _Mapping]]] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ["epoch", "target"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    target: Target
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., epoch: _Optional[int] = ...) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ["epoch", "released_requests", "results"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RELEASED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    released_requests: int
    results: _containers.RepeatedCompositeFieldContainer[WorkerResult]
    def __init__(self, epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[WorkerResult, _Mapping]]] = ..., released_requests: _Optional[int] = ...) -> None: ...

class SetWeightVersionRequest(_message.Message):
    __slots__ = ["epoch", "finish_update", "target", "version"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FINISH_UPDATE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    finish_update: bool
    target: Target
    version: str
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., epoch: _Optional[int] = ..., version: _Optional[str] = ..., finish_update: bool = ...) -> None: ...

class SetWeightVersionResponse(_message.Message):
    __slots__ = ["epoch", "results"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    results: _containers.RepeatedCompositeFieldContainer[WorkerResult]
    def __init__(self, epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[WorkerResult, _Mapping]]] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ["role", "worker_id"]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    role: str
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class Worker(_message.Message):
    __slots__ = ["address", "id", "role"]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    address: str
    id: str
    role: str
    def __init__(self, id: _Optional[str] = ..., role: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class WorkerResult(_message.Message):
    __slots__ = ["body", "error", "http_status", "latency", "ok", "worker"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    body: _struct_pb2.Struct
    error: str
    http_status: int
    latency: _duration_pb2.Duration
    ok: bool
    worker: Worker
    def __init__(self, worker: _Optional[_Union[Worker, _Mapping]] = ..., ok: bool = ..., http_status: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[str] = ..., latency: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WorkerState(_message.Message):
    __slots__ = ["error", "paused", "reachable", "sleeping", "weight_version", "worker", "world_size"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    SLEEPING_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    error: str
    paused: bool
    reachable: bool
    sleeping: bool
    weight_version: str
    worker: Worker
    world_size: int
    def __init__(self, worker: _Optional[_Union[Worker, _Mapping]] = ..., reachable: bool = ..., paused: bool = ..., sleeping: bool = ..., weight_version: _Optional[str] = ..., world_size: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...
