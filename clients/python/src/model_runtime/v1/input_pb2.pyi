from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_TOOL: _ClassVar[Role]

class ResponseFormatKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESPONSE_FORMAT_KIND_UNSPECIFIED: _ClassVar[ResponseFormatKind]
    RESPONSE_FORMAT_KIND_TEXT: _ClassVar[ResponseFormatKind]
    RESPONSE_FORMAT_KIND_JSON_OBJECT: _ClassVar[ResponseFormatKind]
    RESPONSE_FORMAT_KIND_JSON_SCHEMA: _ClassVar[ResponseFormatKind]
ROLE_UNSPECIFIED: Role
ROLE_SYSTEM: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_TOOL: Role
RESPONSE_FORMAT_KIND_UNSPECIFIED: ResponseFormatKind
RESPONSE_FORMAT_KIND_TEXT: ResponseFormatKind
RESPONSE_FORMAT_KIND_JSON_OBJECT: ResponseFormatKind
RESPONSE_FORMAT_KIND_JSON_SCHEMA: ResponseFormatKind

class ExecutionInput(_message.Message):
    __slots__ = ("messages", "tools", "parameters")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    parameters: GenerationParameters
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ..., parameters: _Optional[_Union[GenerationParameters, _Mapping]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    role: Role
    content: _containers.RepeatedCompositeFieldContainer[ContentPart]
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[_Iterable[_Union[ContentPart, _Mapping]]] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ContentPart(_message.Message):
    __slots__ = ("text", "image", "reasoning")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    text: str
    image: ImageContent
    reasoning: Reasoning
    def __init__(self, text: _Optional[str] = ..., image: _Optional[_Union[ImageContent, _Mapping]] = ..., reasoning: _Optional[_Union[Reasoning, _Mapping]] = ...) -> None: ...

class Reasoning(_message.Message):
    __slots__ = ("text", "signature", "redacted")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    text: str
    signature: str
    redacted: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ..., redacted: _Optional[str] = ...) -> None: ...

class ImageContent(_message.Message):
    __slots__ = ("url", "data", "media_type")
    URL_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    url: str
    data: bytes
    media_type: str
    def __init__(self, url: _Optional[str] = ..., data: _Optional[bytes] = ..., media_type: _Optional[str] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ("name", "description", "parameters_json_schema")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json_schema: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json_schema: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class GenerationParameters(_message.Message):
    __slots__ = ("max_output_tokens", "temperature", "top_p", "stop_sequences", "response_format", "reasoning_budget_tokens")
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    REASONING_BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_output_tokens: int
    temperature: float
    top_p: float
    stop_sequences: _containers.RepeatedScalarFieldContainer[str]
    response_format: ResponseFormat
    reasoning_budget_tokens: int
    def __init__(self, max_output_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stop_sequences: _Optional[_Iterable[str]] = ..., response_format: _Optional[_Union[ResponseFormat, _Mapping]] = ..., reasoning_budget_tokens: _Optional[int] = ...) -> None: ...

class ResponseFormat(_message.Message):
    __slots__ = ("kind", "json_schema", "schema_name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_NAME_FIELD_NUMBER: _ClassVar[int]
    kind: ResponseFormatKind
    json_schema: str
    schema_name: str
    def __init__(self, kind: _Optional[_Union[ResponseFormatKind, str]] = ..., json_schema: _Optional[str] = ..., schema_name: _Optional[str] = ...) -> None: ...
