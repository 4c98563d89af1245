from buf.validate import validate_pb2 as _validate_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ENDPOINT_CHAT_COMPLETIONS: Endpoint
ENDPOINT_COMPLETIONS: Endpoint
ENDPOINT_GENERATE: Endpoint
ENDPOINT_MESSAGES: Endpoint
ENDPOINT_RESPONSES: Endpoint
ENDPOINT_UNSPECIFIED: Endpoint
FINISH_REASON_ABORT: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_UNSPECIFIED: FinishReason

class CountTokensRequest(_message.Message):
    __slots__ = ["openai", "request_id"]
    OPENAI_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    openai: OpenAIRequest
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., openai: _Optional[_Union[OpenAIRequest, _Mapping]] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ["input_tokens", "openai", "request_id"]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OPENAI_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    openai: OpenAIResponse
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., input_tokens: _Optional[int] = ..., openai: _Optional[_Union[OpenAIResponse, _Mapping]] = ...) -> None: ...

class CreateConversationItemsRequest(_message.Message):
    __slots__ = ["id", "include", "json"]
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    json: bytes
    def __init__(self, id: _Optional[str] = ..., json: _Optional[bytes] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateConversationItemsResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class CreateConversationRequest(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class CreateConversationResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class DeleteConversationItemRequest(_message.Message):
    __slots__ = ["id", "item_id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    item_id: str
    def __init__(self, id: _Optional[str] = ..., item_id: _Optional[str] = ...) -> None: ...

class DeleteConversationItemResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class DeleteConversationRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteConversationResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class DeleteRequestRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteRequestResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteResponseRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteResponseResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ["openai", "request_id", "session_id", "tokens"]
    OPENAI_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    openai: OpenAIRequest
    request_id: str
    session_id: str
    tokens: TokensRequest
    def __init__(self, request_id: _Optional[str] = ..., openai: _Optional[_Union[OpenAIRequest, _Mapping]] = ..., tokens: _Optional[_Union[TokensRequest, _Mapping]] = ..., session_id: _Optional[str] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ["openai", "request_id", "tokens"]
    OPENAI_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    openai: OpenAIResponse
    request_id: str
    tokens: TokensResponse
    def __init__(self, request_id: _Optional[str] = ..., openai: _Optional[_Union[OpenAIResponse, _Mapping]] = ..., tokens: _Optional[_Union[TokensResponse, _Mapping]] = ...) -> None: ...

class GenerateStreamRequest(_message.Message):
    __slots__ = ["openai", "request_id", "session_id", "tokens"]
    OPENAI_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    openai: OpenAIRequest
    request_id: str
    session_id: str
    tokens: TokensRequest
    def __init__(self, request_id: _Optional[str] = ..., openai: _Optional[_Union[OpenAIRequest, _Mapping]] = ..., tokens: _Optional[_Union[TokensRequest, _Mapping]] = ..., session_id: _Optional[str] = ...) -> None: ...

class GenerateStreamResponse(_message.Message):
    __slots__ = ["openai", "tokens"]
    OPENAI_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    openai: OpenAIEvents
    tokens: TokensChunk
    def __init__(self, openai: _Optional[_Union[OpenAIEvents, _Mapping]] = ..., tokens: _Optional[_Union[TokensChunk, _Mapping]] = ...) -> None: ...

class GetConversationItemRequest(_message.Message):
    __slots__ = ["id", "include", "item_id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    item_id: str
    def __init__(self, id: _Optional[str] = ..., item_id: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class GetConversationItemResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class GetConversationRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetConversationResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class GetRequestRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetRequestResponse(_message.Message):
    __slots__ = ["answer"]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    answer: OpenAIResponse
    def __init__(self, answer: _Optional[_Union[OpenAIResponse, _Mapping]] = ...) -> None: ...

class GetResponseRequest(_message.Message):
    __slots__ = ["id", "include"]
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class GetResponseResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class KwargsItem(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: str
    def __init__(self, data: _Optional[str] = ...) -> None: ...

class ListConversationItemsRequest(_message.Message):
    __slots__ = ["after", "id", "include", "limit", "order"]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    after: str
    id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    order: str
    def __init__(self, id: _Optional[str] = ..., limit: _Optional[int] = ..., order: _Optional[str] = ..., after: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class ListConversationItemsResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class ListInputItemsRequest(_message.Message):
    __slots__ = ["after", "id", "include", "limit", "order"]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    after: str
    id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    order: str
    def __init__(self, id: _Optional[str] = ..., limit: _Optional[int] = ..., order: _Optional[str] = ..., after: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class ListInputItemsResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class MultimodalFeatures(_message.Message):
    __slots__ = ["kwargs_data", "mm_hashes", "mm_placeholders"]
    KWARGS_DATA_FIELD_NUMBER: _ClassVar[int]
    MM_HASHES_FIELD_NUMBER: _ClassVar[int]
    MM_PLACEHOLDERS_FIELD_NUMBER: _ClassVar[int]
    kwargs_data: _containers.RepeatedCompositeFieldContainer[KwargsItem]
    mm_hashes: _containers.RepeatedScalarFieldContainer[str]
    mm_placeholders: _containers.RepeatedCompositeFieldContainer[Placeholder]
    def __init__(self, mm_hashes: _Optional[_Iterable[str]] = ..., mm_placeholders: _Optional[_Iterable[_Union[Placeholder, _Mapping]]] = ..., kwargs_data: _Optional[_Iterable[_Union[KwargsItem, _Mapping]]] = ...) -> None: ...

class OpenAIEvents(_message.Message):
    __slots__ = ["data", "event"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedScalarFieldContainer[bytes]
    event: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, data: _Optional[_Iterable[bytes]] = ..., event: _Optional[_Iterable[str]] = ...) -> None: ...

class OpenAIRequest(_message.Message):
    __slots__ = ["endpoint", "json"]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    endpoint: Endpoint
    json: bytes
    def __init__(self, endpoint: _Optional[_Union[Endpoint, str]] = ..., json: _Optional[bytes] = ...) -> None: ...

class OpenAIResponse(_message.Message):
    __slots__ = ["content_type", "json", "status_code"]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    content_type: str
    json: bytes
    status_code: int
    def __init__(self, status_code: _Optional[int] = ..., content_type: _Optional[str] = ..., json: _Optional[bytes] = ...) -> None: ...

class Placeholder(_message.Message):
    __slots__ = ["length", "offset"]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    length: int
    offset: int
    def __init__(self, offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class PromptLogprob(_message.Message):
    __slots__ = ["logprob", "token_id", "top_logprobs"]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    logprob: float
    token_id: int
    top_logprobs: _containers.RepeatedCompositeFieldContainer[TopLogprob]
    def __init__(self, token_id: _Optional[int] = ..., logprob: _Optional[float] = ..., top_logprobs: _Optional[_Iterable[_Union[TopLogprob, _Mapping]]] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ["frequency_penalty", "ignore_eos", "logprobs", "max_tokens", "min_p", "min_tokens", "n", "presence_penalty", "prompt_logprobs", "repetition_penalty", "seed", "stop_token_ids", "temperature", "top_k", "top_p"]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    MIN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    frequency_penalty: float
    ignore_eos: bool
    logprobs: int
    max_tokens: int
    min_p: float
    min_tokens: int
    n: int
    presence_penalty: float
    prompt_logprobs: int
    repetition_penalty: float
    seed: int
    stop_token_ids: _containers.RepeatedScalarFieldContainer[int]
    temperature: float
    top_k: int
    top_p: float
    def __init__(self, max_tokens: _Optional[int] = ..., min_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., min_p: _Optional[float] = ..., seed: _Optional[int] = ..., stop_token_ids: _Optional[_Iterable[int]] = ..., ignore_eos: bool = ..., logprobs: _Optional[int] = ..., prompt_logprobs: _Optional[int] = ..., n: _Optional[int] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., repetition_penalty: _Optional[float] = ...) -> None: ...

class TokenLogprob(_message.Message):
    __slots__ = ["logprob", "token_id", "top_logprobs"]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    logprob: float
    token_id: int
    top_logprobs: _containers.RepeatedCompositeFieldContainer[TopLogprob]
    def __init__(self, token_id: _Optional[int] = ..., logprob: _Optional[float] = ..., top_logprobs: _Optional[_Iterable[_Union[TopLogprob, _Mapping]]] = ...) -> None: ...

class TokensChoice(_message.Message):
    __slots__ = ["finish_reason", "index", "logprobs", "token_ids", "weight_versions"]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    finish_reason: FinishReason
    index: int
    logprobs: _containers.RepeatedCompositeFieldContainer[TokenLogprob]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    weight_versions: _containers.RepeatedCompositeFieldContainer[WeightVersionSpan]
    def __init__(self, index: _Optional[int] = ..., token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[_Union[TokenLogprob, _Mapping]]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., weight_versions: _Optional[_Iterable[_Union[WeightVersionSpan, _Mapping]]] = ...) -> None: ...

class TokensChunk(_message.Message):
    __slots__ = ["choices", "usage"]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    choices: _containers.RepeatedCompositeFieldContainer[TokensChoice]
    usage: Usage
    def __init__(self, choices: _Optional[_Iterable[_Union[TokensChoice, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class TokensRequest(_message.Message):
    __slots__ = ["cache_salt", "features", "model", "sampling", "token_ids"]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    cache_salt: str
    features: MultimodalFeatures
    model: str
    sampling: SamplingParams
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, model: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., features: _Optional[_Union[MultimodalFeatures, _Mapping]] = ..., cache_salt: _Optional[str] = ...) -> None: ...

class TokensResponse(_message.Message):
    __slots__ = ["choices", "prompt_logprobs", "usage"]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    choices: _containers.RepeatedCompositeFieldContainer[TokensChoice]
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[PromptLogprob]
    usage: Usage
    def __init__(self, choices: _Optional[_Iterable[_Union[TokensChoice, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., prompt_logprobs: _Optional[_Iterable[_Union[PromptLogprob, _Mapping]]] = ...) -> None: ...

class TopLogprob(_message.Message):
    __slots__ = ["logprob", "token_id"]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    logprob: float
    token_id: int
    def __init__(self, token_id: _Optional[int] = ..., logprob: _Optional[float] = ...) -> None: ...

class UpdateConversationRequest(_message.Message):
    __slots__ = ["id", "json"]
    ID_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    json: bytes
    def __init__(self, id: _Optional[str] = ..., json: _Optional[bytes] = ...) -> None: ...

class UpdateConversationResponse(_message.Message):
    __slots__ = ["json"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: bytes
    def __init__(self, json: _Optional[bytes] = ...) -> None: ...

class UpstreamError(_message.Message):
    __slots__ = ["body", "content_type", "leg", "message", "param", "relay", "status_code"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEG_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARAM_FIELD_NUMBER: _ClassVar[int]
    RELAY_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    content_type: str
    leg: str
    message: str
    param: str
    relay: bool
    status_code: int
    def __init__(self, leg: _Optional[str] = ..., status_code: _Optional[int] = ..., content_type: _Optional[str] = ..., body: _Optional[bytes] = ..., relay: bool = ..., message: _Optional[str] = ..., param: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cached_tokens", "completion_tokens", "prompt_tokens", "total_tokens"]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cached_tokens: int
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ...) -> None: ...

class WeightVersionSpan(_message.Message):
    __slots__ = ["count", "start", "version"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    count: int
    start: int
    version: str
    def __init__(self, version: _Optional[str] = ..., start: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class Endpoint(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
