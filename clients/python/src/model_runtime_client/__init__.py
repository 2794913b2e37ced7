"""A Python client of model_runtime.v1 that keeps the service's contract: an execution is a
resumable stream, so an answer is never lost to a dropped connection or a restarted server.

    import grpc
    from model_runtime_client import Client, text_request

    client = Client(grpc.insecure_channel("127.0.0.1:50051"))
    for event in client.execute(text_request("chat", "hello")):
        print(event.sequence, event.type)

`execute` and `watch` yield each event once: when a call breaks they open another, `Watch`
after the last sequence yielded (the same `Execute` again while no event came: the request's
idempotency key, given one if it has none, attaches it to the execution the first call
started), waiting 50 ms doubled up to 2 s or the server's `grpc-retry-pushback-ms`, for up to
`patience` seconds without an event. The wire types are `model_runtime.v1.*_pb2`, generated
from the repository's proto/ (scripts/generate_clients.sh).
"""
import time
import uuid
from typing import Callable, Iterator, Optional

import grpc
from google.protobuf import timestamp_pb2

from model_runtime.v1 import events_pb2, execution_pb2, input_pb2, runtime_pb2, runtime_pb2_grpc

__all__ = ["Client", "text_request", "deadline_in", "events_pb2", "execution_pb2", "input_pb2", "runtime_pb2"]

# The caller's mistakes and a missing execution: resuming cannot mend them.
_FINAL = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}
_TERMINAL = {"completed", "failed"}


def text_request(ability: str, text: str) -> runtime_pb2.ExecuteRequest:
    """A request for `ability` with one user message of `text`."""
    request = runtime_pb2.ExecuteRequest(ability=ability)
    message = request.input.messages.add()
    message.role = input_pb2.ROLE_USER
    message.content.add().text = text
    return request


def deadline_in(request: runtime_pb2.ExecuteRequest, seconds: float) -> None:
    """Sets the protocol's deadline `seconds` from now: the runtime holds the execution to it
    wherever it runs."""
    deadline = timestamp_pb2.Timestamp()
    deadline.FromNanoseconds(time.time_ns() + int(seconds * 1e9))
    request.deadline.CopyFrom(deadline)


def _pushback(error: grpc.RpcError) -> Optional[float]:
    for key, value in (error.trailing_metadata() or ()):
        if key == "grpc-retry-pushback-ms":
            try:
                return min(int(value) / 1000.0, 30.0)
            except ValueError:
                return None
    return None


class Client:
    """The calls of `ModelRuntime` on `channel`, with streams that resume."""

    def __init__(self, channel: grpc.Channel, *, patience: float = 30.0,
                 first_wait: float = 0.05, max_wait: float = 2.0, keys: bool = True):
        self.stub = runtime_pb2_grpc.ModelRuntimeStub(channel)
        self.patience = patience
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.keys = keys

    def _wait(self, tries: int, error: Optional[grpc.RpcError]) -> float:
        pushed = _pushback(error) if error is not None else None
        if pushed is not None:
            return pushed
        return min(self.first_wait * (2 ** min(tries, 16)), self.max_wait)

    def execute(self, request: runtime_pb2.ExecuteRequest,
                on_resume: Optional[Callable[[int, Optional[grpc.RpcError]], None]] = None
                ) -> Iterator[events_pb2.ExecutionEvent]:
        """Runs `request`; yields its events, each once, to the terminal one."""
        if self.keys and not request.idempotency_key:
            request.idempotency_key = "client-" + uuid.uuid4().hex
        return self._follow(request, None, 0, on_resume)

    def watch(self, execution_id: str, after_sequence: int = 0,
              on_resume: Optional[Callable[[int, Optional[grpc.RpcError]], None]] = None
              ) -> Iterator[events_pb2.ExecutionEvent]:
        """The events of `execution_id` after `after_sequence`, each once, to the end."""
        return self._follow(None, execution_id, after_sequence, on_resume)

    def _follow(self, request, execution_id, last, on_resume):
        tries, failing_since = 0, None
        while True:
            error = None
            try:
                if execution_id:
                    call = self.stub.Watch(runtime_pb2.WatchRequest(
                        execution_id=execution_id, after_sequence=last))
                else:
                    call = self.stub.Execute(request)
                for event in call:
                    if event.sequence <= last:
                        continue
                    last, tries, failing_since = event.sequence, 0, None
                    execution_id = execution_id or event.execution_id
                    yield event
                    if event.WhichOneof("payload") in _TERMINAL:
                        return
            except grpc.RpcError as e:
                if e.code() in _FINAL:
                    raise
                error = e
            # Broken before the first event and without a key: never sent twice.
            if not execution_id and not request.idempotency_key:
                if error is not None:
                    raise error
                raise RuntimeError("the call ended before its first event")
            failing_since = failing_since or time.monotonic()
            wait = self._wait(tries, error)
            if time.monotonic() - failing_since + wait > self.patience:
                if error is not None:
                    raise error
                raise RuntimeError(f"the stream ended after sequence {last}, before its execution")
            if on_resume is not None:
                on_resume(last, error)
            time.sleep(wait)
            tries += 1

    def submit(self, request: runtime_pb2.ExecuteRequest) -> execution_pb2.Execution:
        """Starts `request`; retried on UNAVAILABLE and RESOURCE_EXHAUSTED after the server's
        pushback, with the same idempotency key."""
        if self.keys and not request.idempotency_key:
            request.idempotency_key = "client-" + uuid.uuid4().hex
        start, tries = time.monotonic(), 0
        while True:
            try:
                return self.stub.Submit(request)
            except grpc.RpcError as e:
                retriable = e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
                wait = self._wait(tries, e)
                if not retriable or not request.idempotency_key or time.monotonic() - start + wait > self.patience:
                    raise
                time.sleep(wait)
                tries += 1

    def get(self, execution_id: str) -> execution_pb2.Execution:
        return self.stub.GetExecution(runtime_pb2.GetExecutionRequest(execution_id=execution_id))

    def cancel(self, execution_id: str, reason: str = "") -> execution_pb2.Execution:
        return self.stub.CancelExecution(
            runtime_pb2.CancelExecutionRequest(execution_id=execution_id, reason=reason))
