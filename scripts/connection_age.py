#!/usr/bin/env python3
"""A stock grpcio channel against a runtime whose connections age (scripts/connection_age.toml:
1 s, then 0.5 s of grace): the channel is moved to a new connection by the server's GOAWAY,
its calls after the age go through, and a stream longer than age and grace is cut and
resumed with Watch from the last sequence it saw, every event once. Knows the API through
reflection only, like foreign_client.py.

    python3 scripts/connection_age.py 127.0.0.1:50051
"""
import sys
import threading
import time

import grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

PROMPT = " ".join(f"w{n}" for n in range(20))


def main() -> int:
    addr = sys.argv[1]
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(grpc.insecure_channel(addr)))
    service = pool.FindServiceByName("model_runtime.v1.ModelRuntime")
    classes = {
        name: (
            message_factory.GetMessageClass(service.methods_by_name[name].input_type),
            message_factory.GetMessageClass(service.methods_by_name[name].output_type),
        )
        for name in ["Execute", "Watch", "GetRuntimeMetadata"]
    }
    role = pool.FindEnumTypeByName("model_runtime.v1.Role").values_by_name["ROLE_USER"].number
    channel = grpc.insecure_channel(addr)
    ready = []

    def on_state(state):
        if state == grpc.ChannelConnectivity.READY:
            ready.append(time.monotonic())

    channel.subscribe(on_state, try_to_connect=True)
    try:
        return check(channel, classes, role, ready)
    finally:
        # The subscription's polling thread would keep the interpreter from exiting.
        channel.unsubscribe(on_state)
        channel.close()


def check(channel, classes, role, ready) -> int:
    def call(kind, name):
        request_class, response_class = classes[name]
        method = getattr(channel, kind)(
            f"/model_runtime.v1.ModelRuntime/{name}",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )
        return request_class, method

    execute_request, execute = call("unary_stream", "Execute")
    watch_request, watch = call("unary_stream", "Watch")
    metadata_request, metadata = call("unary_unary", "GetRuntimeMetadata")

    metadata(metadata_request(), timeout=10)
    time.sleep(1.5)  # past the age (at most 1.1 s) and its grace: GOAWAY came
    metadata(metadata_request(), timeout=10)
    # The subscription's thread delivers state changes on its own time: wait for the READY.
    waited = time.monotonic() + 2
    while len(ready) < 2 and time.monotonic() < waited:
        time.sleep(0.02)
    if len(ready) < 2:
        print(f"FAIL the channel was READY {len(ready)} times: no new connection after the age")
        return 1
    print(f"ok   a call after the age went through on a new connection ({len(ready)} READY)")

    request = execute_request(ability="chat")
    message = request.input.messages.add()
    message.role = role
    message.content.add().text = PROMPT
    seen = []
    try:
        for event in execute(request, timeout=10):
            seen.append(event)
        print("FAIL a 2 s stream outlived a 1 s age and its 0.5 s grace")
        return 1
    except grpc.RpcError as e:
        print(f"ok   the stream was cut at the age's grace: {e.code()} after {len(seen)} events")
    if not seen:
        print("FAIL no event before the cut")
        return 1
    last = seen[-1].sequence
    for event in watch(watch_request(execution_id=seen[0].execution_id, after_sequence=last), timeout=10):
        seen.append(event)
    sequences = [e.sequence for e in seen]
    text = "".join(e.text_delta.text for e in seen if e.HasField("text_delta"))
    if sequences != list(range(1, len(seen) + 1)) or seen[-1].type != "execution.completed":
        print(f"FAIL resumed events are not 1..n once each, ending completed: {sequences}")
        return 1
    if text.split() != PROMPT.split():
        print(f"FAIL resumed text {text!r}")
        return 1
    print(f"ok   Watch after sequence {last} gave the rest: {len(seen)} events, each once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
