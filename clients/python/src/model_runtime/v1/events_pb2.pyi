import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from model_runtime.v1 import execution_pb2 as _execution_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecutionEvent(_message.Message):
    __slots__ = ("execution_id", "sequence", "time", "type", "state", "accepted", "routing", "attempt_started", "attempt_failed", "text_delta", "tool_call_started", "tool_call_arguments_delta", "progress", "usage_reported", "completed", "failed", "reasoning_delta")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ROUTING_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_STARTED_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FAILED_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ARGUMENTS_DELTA_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    USAGE_REPORTED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASONING_DELTA_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    sequence: int
    time: _timestamp_pb2.Timestamp
    type: str
    state: _execution_pb2.ExecutionState
    accepted: ExecutionAccepted
    routing: ExecutionRouting
    attempt_started: RouteAttemptStarted
    attempt_failed: RouteAttemptFailed
    text_delta: OutputTextDelta
    tool_call_started: OutputToolCallStarted
    tool_call_arguments_delta: OutputToolCallArgumentsDelta
    progress: ExecutionProgress
    usage_reported: UsageReported
    completed: ExecutionCompleted
    failed: ExecutionFailed
    reasoning_delta: OutputReasoningDelta
    def __init__(self, execution_id: _Optional[str] = ..., sequence: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., type: _Optional[str] = ..., state: _Optional[_Union[_execution_pb2.ExecutionState, str]] = ..., accepted: _Optional[_Union[ExecutionAccepted, _Mapping]] = ..., routing: _Optional[_Union[ExecutionRouting, _Mapping]] = ..., attempt_started: _Optional[_Union[RouteAttemptStarted, _Mapping]] = ..., attempt_failed: _Optional[_Union[RouteAttemptFailed, _Mapping]] = ..., text_delta: _Optional[_Union[OutputTextDelta, _Mapping]] = ..., tool_call_started: _Optional[_Union[OutputToolCallStarted, _Mapping]] = ..., tool_call_arguments_delta: _Optional[_Union[OutputToolCallArgumentsDelta, _Mapping]] = ..., progress: _Optional[_Union[ExecutionProgress, _Mapping]] = ..., usage_reported: _Optional[_Union[UsageReported, _Mapping]] = ..., completed: _Optional[_Union[ExecutionCompleted, _Mapping]] = ..., failed: _Optional[_Union[ExecutionFailed, _Mapping]] = ..., reasoning_delta: _Optional[_Union[OutputReasoningDelta, _Mapping]] = ...) -> None: ...

class OutputReasoningDelta(_message.Message):
    __slots__ = ("attempt", "text", "signature", "redacted")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    text: str
    signature: str
    redacted: str
    def __init__(self, attempt: _Optional[int] = ..., text: _Optional[str] = ..., signature: _Optional[str] = ..., redacted: _Optional[str] = ...) -> None: ...

class ExecutionAccepted(_message.Message):
    __slots__ = ("ability", "policy", "limits")
    ABILITY_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    ability: str
    policy: str
    limits: _execution_pb2.EffectiveLimits
    def __init__(self, ability: _Optional[str] = ..., policy: _Optional[str] = ..., limits: _Optional[_Union[_execution_pb2.EffectiveLimits, _Mapping]] = ...) -> None: ...

class ExecutionRouting(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: _execution_pb2.RoutingPlan
    def __init__(self, plan: _Optional[_Union[_execution_pb2.RoutingPlan, _Mapping]] = ...) -> None: ...

class RouteAttemptStarted(_message.Message):
    __slots__ = ("attempt", "provider", "model")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    provider: str
    model: str
    def __init__(self, attempt: _Optional[int] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class RouteAttemptFailed(_message.Message):
    __slots__ = ("attempt",)
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    attempt: _execution_pb2.Attempt
    def __init__(self, attempt: _Optional[_Union[_execution_pb2.Attempt, _Mapping]] = ...) -> None: ...

class OutputTextDelta(_message.Message):
    __slots__ = ("attempt", "text")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    text: str
    def __init__(self, attempt: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class OutputToolCallStarted(_message.Message):
    __slots__ = ("attempt", "index", "id", "name")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    index: int
    id: str
    name: str
    def __init__(self, attempt: _Optional[int] = ..., index: _Optional[int] = ..., id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class OutputToolCallArgumentsDelta(_message.Message):
    __slots__ = ("attempt", "index", "delta")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    index: int
    delta: str
    def __init__(self, attempt: _Optional[int] = ..., index: _Optional[int] = ..., delta: _Optional[str] = ...) -> None: ...

class ExecutionProgress(_message.Message):
    __slots__ = ("attempt", "message")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    message: str
    def __init__(self, attempt: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class UsageReported(_message.Message):
    __slots__ = ("fact",)
    FACT_FIELD_NUMBER: _ClassVar[int]
    fact: _execution_pb2.UsageFact
    def __init__(self, fact: _Optional[_Union[_execution_pb2.UsageFact, _Mapping]] = ...) -> None: ...

class ExecutionCompleted(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _execution_pb2.ExecutionResult
    def __init__(self, result: _Optional[_Union[_execution_pb2.ExecutionResult, _Mapping]] = ...) -> None: ...

class ExecutionFailed(_message.Message):
    __slots__ = ("error", "partial_output", "cancel_reason")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    error: _execution_pb2.ExecutionError
    partial_output: _execution_pb2.Output
    cancel_reason: str
    def __init__(self, error: _Optional[_Union[_execution_pb2.ExecutionError, _Mapping]] = ..., partial_output: _Optional[_Union[_execution_pb2.Output, _Mapping]] = ..., cancel_reason: _Optional[str] = ...) -> None: ...
