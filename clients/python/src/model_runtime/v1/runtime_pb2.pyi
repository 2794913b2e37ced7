import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from model_runtime.v1 import events_pb2 as _events_pb2
from model_runtime.v1 import execution_pb2 as _execution_pb2
from model_runtime.v1 import input_pb2 as _input_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RuntimeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUNTIME_STATE_UNSPECIFIED: _ClassVar[RuntimeState]
    RUNTIME_STATE_READY: _ClassVar[RuntimeState]
    RUNTIME_STATE_STOPPING: _ClassVar[RuntimeState]
    RUNTIME_STATE_UNAVAILABLE: _ClassVar[RuntimeState]

class HealthState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HEALTH_STATE_UNSPECIFIED: _ClassVar[HealthState]
    HEALTH_STATE_OFF: _ClassVar[HealthState]
    HEALTH_STATE_CLOSED: _ClassVar[HealthState]
    HEALTH_STATE_OPEN: _ClassVar[HealthState]
    HEALTH_STATE_HALF_OPEN: _ClassVar[HealthState]

class OnAllUnhealthy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_ALL_UNHEALTHY_UNSPECIFIED: _ClassVar[OnAllUnhealthy]
    ON_ALL_UNHEALTHY_TRY_ANYWAY: _ClassVar[OnAllUnhealthy]
    ON_ALL_UNHEALTHY_FAIL: _ClassVar[OnAllUnhealthy]

class OnRejected(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_REJECTED_UNSPECIFIED: _ClassVar[OnRejected]
    ON_REJECTED_FALLBACK: _ClassVar[OnRejected]
    ON_REJECTED_STOP: _ClassVar[OnRejected]

class OnContentFilter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_CONTENT_FILTER_UNSPECIFIED: _ClassVar[OnContentFilter]
    ON_CONTENT_FILTER_STOP: _ClassVar[OnContentFilter]
    ON_CONTENT_FILTER_FALLBACK: _ClassVar[OnContentFilter]

class OnUnknownOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_UNKNOWN_OUTCOME_UNSPECIFIED: _ClassVar[OnUnknownOutcome]
    ON_UNKNOWN_OUTCOME_STOP: _ClassVar[OnUnknownOutcome]
    ON_UNKNOWN_OUTCOME_RETRY: _ClassVar[OnUnknownOutcome]
    ON_UNKNOWN_OUTCOME_FALLBACK: _ClassVar[OnUnknownOutcome]
RUNTIME_STATE_UNSPECIFIED: RuntimeState
RUNTIME_STATE_READY: RuntimeState
RUNTIME_STATE_STOPPING: RuntimeState
RUNTIME_STATE_UNAVAILABLE: RuntimeState
HEALTH_STATE_UNSPECIFIED: HealthState
HEALTH_STATE_OFF: HealthState
HEALTH_STATE_CLOSED: HealthState
HEALTH_STATE_OPEN: HealthState
HEALTH_STATE_HALF_OPEN: HealthState
ON_ALL_UNHEALTHY_UNSPECIFIED: OnAllUnhealthy
ON_ALL_UNHEALTHY_TRY_ANYWAY: OnAllUnhealthy
ON_ALL_UNHEALTHY_FAIL: OnAllUnhealthy
ON_REJECTED_UNSPECIFIED: OnRejected
ON_REJECTED_FALLBACK: OnRejected
ON_REJECTED_STOP: OnRejected
ON_CONTENT_FILTER_UNSPECIFIED: OnContentFilter
ON_CONTENT_FILTER_STOP: OnContentFilter
ON_CONTENT_FILTER_FALLBACK: OnContentFilter
ON_UNKNOWN_OUTCOME_UNSPECIFIED: OnUnknownOutcome
ON_UNKNOWN_OUTCOME_STOP: OnUnknownOutcome
ON_UNKNOWN_OUTCOME_RETRY: OnUnknownOutcome
ON_UNKNOWN_OUTCOME_FALLBACK: OnUnknownOutcome

class ExecuteRequest(_message.Message):
    __slots__ = ("ability", "requirements", "input", "deadline", "policy", "max_attempts", "allow_fallback", "idempotency_key", "labels", "delivery", "priority", "target")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ABILITY_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ability: str
    requirements: Requirements
    input: _input_pb2.ExecutionInput
    deadline: _timestamp_pb2.Timestamp
    policy: str
    max_attempts: int
    allow_fallback: bool
    idempotency_key: str
    labels: _containers.ScalarMap[str, str]
    delivery: _execution_pb2.Delivery
    priority: _execution_pb2.Priority
    target: str
    def __init__(self, ability: _Optional[str] = ..., requirements: _Optional[_Union[Requirements, _Mapping]] = ..., input: _Optional[_Union[_input_pb2.ExecutionInput, _Mapping]] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., policy: _Optional[str] = ..., max_attempts: _Optional[int] = ..., allow_fallback: _Optional[bool] = ..., idempotency_key: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., delivery: _Optional[_Union[_execution_pb2.Delivery, str]] = ..., priority: _Optional[_Union[_execution_pb2.Priority, str]] = ..., target: _Optional[str] = ...) -> None: ...

class Requirements(_message.Message):
    __slots__ = ("capabilities",)
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, capabilities: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("execution_id", "after_sequence")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    after_sequence: int
    def __init__(self, execution_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class GetExecutionRequest(_message.Message):
    __slots__ = ("execution_id",)
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    def __init__(self, execution_id: _Optional[str] = ...) -> None: ...

class CancelExecutionRequest(_message.Message):
    __slots__ = ("execution_id", "reason")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    reason: str
    def __init__(self, execution_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class GetRuntimeMetadataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RuntimeMetadata(_message.Message):
    __slots__ = ("state", "version", "store", "providers", "abilities", "policies")
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    ABILITIES_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    state: RuntimeState
    version: str
    store: StoreInfo
    providers: _containers.RepeatedCompositeFieldContainer[ProviderInfo]
    abilities: _containers.RepeatedCompositeFieldContainer[AbilityInfo]
    policies: _containers.RepeatedCompositeFieldContainer[PolicyInfo]
    def __init__(self, state: _Optional[_Union[RuntimeState, str]] = ..., version: _Optional[str] = ..., store: _Optional[_Union[StoreInfo, _Mapping]] = ..., providers: _Optional[_Iterable[_Union[ProviderInfo, _Mapping]]] = ..., abilities: _Optional[_Iterable[_Union[AbilityInfo, _Mapping]]] = ..., policies: _Optional[_Iterable[_Union[PolicyInfo, _Mapping]]] = ...) -> None: ...

class StoreInfo(_message.Message):
    __slots__ = ("kind", "durable", "max_executions", "retention", "executions", "max_bytes", "bytes")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    kind: str
    durable: bool
    max_executions: int
    retention: _duration_pb2.Duration
    executions: int
    max_bytes: int
    bytes: int
    def __init__(self, kind: _Optional[str] = ..., durable: _Optional[bool] = ..., max_executions: _Optional[int] = ..., retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., executions: _Optional[int] = ..., max_bytes: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class ProviderInfo(_message.Message):
    __slots__ = ("name", "adapter", "max_concurrency", "queue_capacity", "in_flight", "queued", "models", "limiter", "global_in_flight", "limiter_reachable", "on_unknown_outcome", "queues")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    LIMITER_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LIMITER_REACHABLE_FIELD_NUMBER: _ClassVar[int]
    ON_UNKNOWN_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    adapter: str
    max_concurrency: int
    queue_capacity: int
    in_flight: int
    queued: int
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    limiter: str
    global_in_flight: int
    limiter_reachable: bool
    on_unknown_outcome: OnUnknownOutcome
    queues: _containers.RepeatedCompositeFieldContainer[AdmissionQueue]
    def __init__(self, name: _Optional[str] = ..., adapter: _Optional[str] = ..., max_concurrency: _Optional[int] = ..., queue_capacity: _Optional[int] = ..., in_flight: _Optional[int] = ..., queued: _Optional[int] = ..., models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ..., limiter: _Optional[str] = ..., global_in_flight: _Optional[int] = ..., limiter_reachable: _Optional[bool] = ..., on_unknown_outcome: _Optional[_Union[OnUnknownOutcome, str]] = ..., queues: _Optional[_Iterable[_Union[AdmissionQueue, _Mapping]]] = ...) -> None: ...

class AdmissionQueue(_message.Message):
    __slots__ = ("priority", "capacity", "queued", "oldest_wait")
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    OLDEST_WAIT_FIELD_NUMBER: _ClassVar[int]
    priority: _execution_pb2.Priority
    capacity: int
    queued: int
    oldest_wait: _duration_pb2.Duration
    def __init__(self, priority: _Optional[_Union[_execution_pb2.Priority, str]] = ..., capacity: _Optional[int] = ..., queued: _Optional[int] = ..., oldest_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "capabilities", "health")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    name: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    health: TargetHealth
    def __init__(self, name: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., health: _Optional[_Union[TargetHealth, _Mapping]] = ...) -> None: ...

class TargetHealth(_message.Message):
    __slots__ = ("state", "reason", "until", "consecutive_failures", "ejections")
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    EJECTIONS_FIELD_NUMBER: _ClassVar[int]
    state: HealthState
    reason: str
    until: _timestamp_pb2.Timestamp
    consecutive_failures: int
    ejections: int
    def __init__(self, state: _Optional[_Union[HealthState, str]] = ..., reason: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., consecutive_failures: _Optional[int] = ..., ejections: _Optional[int] = ...) -> None: ...

class AbilityInfo(_message.Message):
    __slots__ = ("name", "default_policy", "allowed_policies", "requires")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_POLICY_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_POLICIES_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_FIELD_NUMBER: _ClassVar[int]
    name: str
    default_policy: str
    allowed_policies: _containers.RepeatedScalarFieldContainer[str]
    requires: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., default_policy: _Optional[str] = ..., allowed_policies: _Optional[_Iterable[str]] = ..., requires: _Optional[_Iterable[str]] = ...) -> None: ...

class PolicyInfo(_message.Message):
    __slots__ = ("name", "targets", "max_attempts", "retry_budget", "retries_per_target", "min_attempt_time", "on_rejected", "on_unknown_outcome", "on_content_filter", "delivery", "health", "on_all_unhealthy")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RETRIES_PER_TARGET_FIELD_NUMBER: _ClassVar[int]
    MIN_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    ON_REJECTED_FIELD_NUMBER: _ClassVar[int]
    ON_UNKNOWN_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ON_CONTENT_FILTER_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    ON_ALL_UNHEALTHY_FIELD_NUMBER: _ClassVar[int]
    name: str
    targets: _containers.RepeatedScalarFieldContainer[str]
    max_attempts: int
    retry_budget: _duration_pb2.Duration
    retries_per_target: int
    min_attempt_time: _duration_pb2.Duration
    on_rejected: OnRejected
    on_unknown_outcome: OnUnknownOutcome
    on_content_filter: OnContentFilter
    delivery: _execution_pb2.Delivery
    health: bool
    on_all_unhealthy: OnAllUnhealthy
    def __init__(self, name: _Optional[str] = ..., targets: _Optional[_Iterable[str]] = ..., max_attempts: _Optional[int] = ..., retry_budget: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retries_per_target: _Optional[int] = ..., min_attempt_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., on_rejected: _Optional[_Union[OnRejected, str]] = ..., on_unknown_outcome: _Optional[_Union[OnUnknownOutcome, str]] = ..., on_content_filter: _Optional[_Union[OnContentFilter, str]] = ..., delivery: _Optional[_Union[_execution_pb2.Delivery, str]] = ..., health: _Optional[bool] = ..., on_all_unhealthy: _Optional[_Union[OnAllUnhealthy, str]] = ...) -> None: ...

class StreamUsageRequest(_message.Message):
    __slots__ = ("after_cursor",)
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    after_cursor: str
    def __init__(self, after_cursor: _Optional[str] = ...) -> None: ...

class UsageRecord(_message.Message):
    __slots__ = ("cursor", "execution_id", "sequence", "time", "fact")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    execution_id: str
    sequence: int
    time: _timestamp_pb2.Timestamp
    fact: _execution_pb2.UsageFact
    def __init__(self, cursor: _Optional[str] = ..., execution_id: _Optional[str] = ..., sequence: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fact: _Optional[_Union[_execution_pb2.UsageFact, _Mapping]] = ...) -> None: ...
