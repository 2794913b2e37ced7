import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from model_runtime.v1 import input_pb2 as _input_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecutionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTION_STATE_UNSPECIFIED: _ClassVar[ExecutionState]
    EXECUTION_STATE_ACCEPTED: _ClassVar[ExecutionState]
    EXECUTION_STATE_ROUTING: _ClassVar[ExecutionState]
    EXECUTION_STATE_RUNNING: _ClassVar[ExecutionState]
    EXECUTION_STATE_SUCCEEDED: _ClassVar[ExecutionState]
    EXECUTION_STATE_FAILED: _ClassVar[ExecutionState]
    EXECUTION_STATE_CANCELLED: _ClassVar[ExecutionState]

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_UNSPECIFIED: _ClassVar[Priority]
    PRIORITY_INTERACTIVE: _ClassVar[Priority]
    PRIORITY_STANDARD: _ClassVar[Priority]
    PRIORITY_BATCH: _ClassVar[Priority]

class Delivery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELIVERY_UNSPECIFIED: _ClassVar[Delivery]
    DELIVERY_STREAMED: _ClassVar[Delivery]
    DELIVERY_BUFFERED: _ClassVar[Delivery]

class ErrorClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CLASS_UNSPECIFIED: _ClassVar[ErrorClass]
    ERROR_CLASS_RETRYABLE: _ClassVar[ErrorClass]
    ERROR_CLASS_REJECTED: _ClassVar[ErrorClass]
    ERROR_CLASS_OUTCOME_UNKNOWN: _ClassVar[ErrorClass]
    ERROR_CLASS_INVALID: _ClassVar[ErrorClass]
    ERROR_CLASS_INTERRUPTED: _ClassVar[ErrorClass]

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_NOT_STARTED: _ClassVar[Outcome]
    OUTCOME_FAILED: _ClassVar[Outcome]
    OUTCOME_UNKNOWN: _ClassVar[Outcome]
    OUTCOME_COMPLETED: _ClassVar[Outcome]
    OUTCOME_INTERRUPTED: _ClassVar[Outcome]

class NextAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NEXT_ACTION_UNSPECIFIED: _ClassVar[NextAction]
    NEXT_ACTION_RETRY_SAME_TARGET: _ClassVar[NextAction]
    NEXT_ACTION_FALLBACK: _ClassVar[NextAction]
    NEXT_ACTION_STOP: _ClassVar[NextAction]

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_TOOL_CALLS: _ClassVar[FinishReason]
    FINISH_REASON_CONTENT_FILTER: _ClassVar[FinishReason]
    FINISH_REASON_OTHER: _ClassVar[FinishReason]
    FINISH_REASON_REFUSAL: _ClassVar[FinishReason]

class UsageSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    USAGE_SOURCE_UNSPECIFIED: _ClassVar[UsageSource]
    USAGE_SOURCE_PROVIDER_REPORTED: _ClassVar[UsageSource]
    USAGE_SOURCE_RUNTIME_MEASURED: _ClassVar[UsageSource]
    USAGE_SOURCE_RUNTIME_ESTIMATED: _ClassVar[UsageSource]
EXECUTION_STATE_UNSPECIFIED: ExecutionState
EXECUTION_STATE_ACCEPTED: ExecutionState
EXECUTION_STATE_ROUTING: ExecutionState
EXECUTION_STATE_RUNNING: ExecutionState
EXECUTION_STATE_SUCCEEDED: ExecutionState
EXECUTION_STATE_FAILED: ExecutionState
EXECUTION_STATE_CANCELLED: ExecutionState
PRIORITY_UNSPECIFIED: Priority
PRIORITY_INTERACTIVE: Priority
PRIORITY_STANDARD: Priority
PRIORITY_BATCH: Priority
DELIVERY_UNSPECIFIED: Delivery
DELIVERY_STREAMED: Delivery
DELIVERY_BUFFERED: Delivery
ERROR_CLASS_UNSPECIFIED: ErrorClass
ERROR_CLASS_RETRYABLE: ErrorClass
ERROR_CLASS_REJECTED: ErrorClass
ERROR_CLASS_OUTCOME_UNKNOWN: ErrorClass
ERROR_CLASS_INVALID: ErrorClass
ERROR_CLASS_INTERRUPTED: ErrorClass
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_NOT_STARTED: Outcome
OUTCOME_FAILED: Outcome
OUTCOME_UNKNOWN: Outcome
OUTCOME_COMPLETED: Outcome
OUTCOME_INTERRUPTED: Outcome
NEXT_ACTION_UNSPECIFIED: NextAction
NEXT_ACTION_RETRY_SAME_TARGET: NextAction
NEXT_ACTION_FALLBACK: NextAction
NEXT_ACTION_STOP: NextAction
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_TOOL_CALLS: FinishReason
FINISH_REASON_CONTENT_FILTER: FinishReason
FINISH_REASON_OTHER: FinishReason
FINISH_REASON_REFUSAL: FinishReason
USAGE_SOURCE_UNSPECIFIED: UsageSource
USAGE_SOURCE_PROVIDER_REPORTED: UsageSource
USAGE_SOURCE_RUNTIME_MEASURED: UsageSource
USAGE_SOURCE_RUNTIME_ESTIMATED: UsageSource

class Execution(_message.Message):
    __slots__ = ("execution_id", "state", "ability", "policy", "created_at", "updated_at", "limits", "last_sequence", "plan", "attempts", "provider", "model", "result", "error", "partial_output", "usage", "labels", "idempotency_key")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ABILITY_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    state: ExecutionState
    ability: str
    policy: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    limits: EffectiveLimits
    last_sequence: int
    plan: RoutingPlan
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    provider: str
    model: str
    result: ExecutionResult
    error: ExecutionError
    partial_output: Output
    usage: _containers.RepeatedCompositeFieldContainer[UsageFact]
    labels: _containers.ScalarMap[str, str]
    idempotency_key: str
    def __init__(self, execution_id: _Optional[str] = ..., state: _Optional[_Union[ExecutionState, str]] = ..., ability: _Optional[str] = ..., policy: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., limits: _Optional[_Union[EffectiveLimits, _Mapping]] = ..., last_sequence: _Optional[int] = ..., plan: _Optional[_Union[RoutingPlan, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., result: _Optional[_Union[ExecutionResult, _Mapping]] = ..., error: _Optional[_Union[ExecutionError, _Mapping]] = ..., partial_output: _Optional[_Union[Output, _Mapping]] = ..., usage: _Optional[_Iterable[_Union[UsageFact, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class EffectiveLimits(_message.Message):
    __slots__ = ("deadline", "max_attempts", "allow_fallback", "retry_budget", "delivery", "priority")
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    RETRY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    max_attempts: int
    allow_fallback: bool
    retry_budget: _duration_pb2.Duration
    delivery: Delivery
    priority: Priority
    def __init__(self, deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_attempts: _Optional[int] = ..., allow_fallback: _Optional[bool] = ..., retry_budget: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., delivery: _Optional[_Union[Delivery, str]] = ..., priority: _Optional[_Union[Priority, str]] = ...) -> None: ...

class RoutingPlan(_message.Message):
    __slots__ = ("policy", "required_capabilities", "targets", "ended_before_routing", "tried_anyway")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    ENDED_BEFORE_ROUTING_FIELD_NUMBER: _ClassVar[int]
    TRIED_ANYWAY_FIELD_NUMBER: _ClassVar[int]
    policy: str
    required_capabilities: _containers.RepeatedScalarFieldContainer[str]
    targets: _containers.RepeatedCompositeFieldContainer[PlanTarget]
    ended_before_routing: str
    tried_anyway: bool
    def __init__(self, policy: _Optional[str] = ..., required_capabilities: _Optional[_Iterable[str]] = ..., targets: _Optional[_Iterable[_Union[PlanTarget, _Mapping]]] = ..., ended_before_routing: _Optional[str] = ..., tried_anyway: _Optional[bool] = ...) -> None: ...

class PlanTarget(_message.Message):
    __slots__ = ("provider", "model", "kept", "reason", "missing_capabilities", "ejected")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MISSING_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    EJECTED_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    kept: bool
    reason: str
    missing_capabilities: _containers.RepeatedScalarFieldContainer[str]
    ejected: Ejection
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., kept: _Optional[bool] = ..., reason: _Optional[str] = ..., missing_capabilities: _Optional[_Iterable[str]] = ..., ejected: _Optional[_Union[Ejection, _Mapping]] = ...) -> None: ...

class Ejection(_message.Message):
    __slots__ = ("reason", "until")
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    reason: str
    until: _timestamp_pb2.Timestamp
    def __init__(self, reason: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("number", "provider", "model", "started_at", "duration", "error", "output_committed", "outcome", "next_action", "admitted", "held_output")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    NEXT_ACTION_FIELD_NUMBER: _ClassVar[int]
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    HELD_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    number: int
    provider: str
    model: str
    started_at: _timestamp_pb2.Timestamp
    duration: _duration_pb2.Duration
    error: AttemptError
    output_committed: bool
    outcome: Outcome
    next_action: NextAction
    admitted: bool
    held_output: Output
    def __init__(self, number: _Optional[int] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error: _Optional[_Union[AttemptError, _Mapping]] = ..., output_committed: _Optional[bool] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., next_action: _Optional[_Union[NextAction, str]] = ..., admitted: _Optional[bool] = ..., held_output: _Optional[_Union[Output, _Mapping]] = ...) -> None: ...

class AttemptError(_message.Message):
    __slots__ = ("code", "message", "retry_after")
    CLASS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    retry_after: _duration_pb2.Duration
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., **kwargs) -> None: ...

class Output(_message.Message):
    __slots__ = ("text", "tool_calls", "reasoning")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    text: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_input_pb2.ToolCall]
    reasoning: _containers.RepeatedCompositeFieldContainer[_input_pb2.Reasoning]
    def __init__(self, text: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_input_pb2.ToolCall, _Mapping]]] = ..., reasoning: _Optional[_Iterable[_Union[_input_pb2.Reasoning, _Mapping]]] = ...) -> None: ...

class ExecutionResult(_message.Message):
    __slots__ = ("output", "finish_reason", "provider", "model", "attempt")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    output: Output
    finish_reason: FinishReason
    provider: str
    model: str
    attempt: int
    def __init__(self, output: _Optional[_Union[Output, _Mapping]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class ExecutionError(_message.Message):
    __slots__ = ("code", "message", "outcome", "last_attempt_error")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LAST_ATTEMPT_ERROR_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    outcome: Outcome
    last_attempt_error: AttemptError
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., last_attempt_error: _Optional[_Union[AttemptError, _Mapping]] = ...) -> None: ...

class UsageFact(_message.Message):
    __slots__ = ("unit", "quantity", "source", "attempt", "provider", "model", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UNIT_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    unit: str
    quantity: int
    source: UsageSource
    attempt: int
    provider: str
    model: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, unit: _Optional[str] = ..., quantity: _Optional[int] = ..., source: _Optional[_Union[UsageSource, str]] = ..., attempt: _Optional[int] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...
