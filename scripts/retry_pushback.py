#!/usr/bin/env python3
"""A stock grpcio channel whose service config retries Submit on RESOURCE_EXHAUSTED, against a
runtime whose store is full (scripts/retry_pushback.toml: room for one execution, which
never ends): the refusal's grpc-retry-pushback-ms (1 s) sets the wait before the retry, not
the policy's 0.1 s backoff. Knows the API through reflection only, like foreign_client.py.

    python3 scripts/retry_pushback.py 127.0.0.1:50051
"""
import json
import sys
import time

import grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

SERVICE_CONFIG = {
    "methodConfig": [{
        "name": [{"service": "model_runtime.v1.ModelRuntime", "method": "Submit"}],
        "retryPolicy": {
            "maxAttempts": 2,
            "initialBackoff": "0.1s",
            "maxBackoff": "0.1s",
            "backoffMultiplier": 1,
            "retryableStatusCodes": ["RESOURCE_EXHAUSTED"],
        },
    }]
}


def main() -> int:
    addr = sys.argv[1]
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(grpc.insecure_channel(addr)))
    method = pool.FindServiceByName("model_runtime.v1.ModelRuntime").methods_by_name["Submit"]
    request_class = message_factory.GetMessageClass(method.input_type)
    execution_class = message_factory.GetMessageClass(method.output_type)
    role = pool.FindEnumTypeByName("model_runtime.v1.Role").values_by_name["ROLE_USER"].number
    channel = grpc.insecure_channel(
        addr,
        options=[("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(SERVICE_CONFIG))],
    )
    submit = channel.unary_unary(
        "/model_runtime.v1.ModelRuntime/Submit",
        request_serializer=request_class.SerializeToString,
        response_deserializer=execution_class.FromString,
    )

    def request(text):
        r = request_class(ability="chat")
        message = r.input.messages.add()
        message.role = role
        message.content.add().text = text
        return r

    submit(request("fills the store"), timeout=10)
    start = time.monotonic()
    try:
        submit(request("finds it full"), timeout=10)
        print("FAIL a full store took a submission")
        return 1
    except grpc.RpcError as e:
        waited = time.monotonic() - start
        if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
            print(f"FAIL refused with {e.code()}, not RESOURCE_EXHAUSTED")
            return 1
        pushback = dict(e.trailing_metadata() or ()).get("grpc-retry-pushback-ms")
        print(f"refused with RESOURCE_EXHAUSTED after {waited:.2f} s, pushback {pushback} ms")
        if pushback != "1000" or waited < 0.9:
            print("FAIL the retry did not wait for the server's pushback")
            return 1
    print("ok   grpcio retried after the server's pushback")
    return 0


if __name__ == "__main__":
    sys.exit(main())
