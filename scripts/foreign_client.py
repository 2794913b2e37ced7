#!/usr/bin/env python3
"""A foreign client that knows the API only through server reflection (v1alpha, as
grpcio-reflection speaks it): it lists the services, builds the message classes from the
served descriptors, runs one Execute and prints the events; then the same Execute with its
request compressed (grpcio's `compression=grpc.Compression.Gzip`, as a gateway sends a large
prompt).

    pip install grpcio grpcio-reflection protobuf
    python3 scripts/foreign_client.py 127.0.0.1:50051 "hello"
"""
import sys

import grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    prompt = sys.argv[2] if len(sys.argv) > 2 else "hello from python"
    channel = grpc.insecure_channel(addr)
    database = ProtoReflectionDescriptorDatabase(channel)
    services = database.get_services()
    print("services:", ", ".join(sorted(services)))
    if "model_runtime.v1.ModelRuntime" not in services:
        return 1
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName("model_runtime.v1.ModelRuntime")
    method = service.methods_by_name["Execute"]
    request_class = message_factory.GetMessageClass(method.input_type)
    event_class = message_factory.GetMessageClass(method.output_type)
    role = pool.FindEnumTypeByName("model_runtime.v1.Role").values_by_name["ROLE_USER"].number
    call = channel.unary_stream(
        "/model_runtime.v1.ModelRuntime/Execute",
        request_serializer=request_class.SerializeToString,
        response_deserializer=event_class.FromString,
    )
    # The compressed call's prompt is long enough that gzip makes it smaller (grpcio sends a
    # message uncompressed when compressing would not).
    for compression, text in (
        (grpc.Compression.NoCompression, prompt),
        (grpc.Compression.Gzip, " ".join([prompt] * 200)),
    ):
        request = request_class(ability="chat")
        message = request.input.messages.add()
        message.role = role
        message.content.add().text = text
        last = None
        for event in call(request, timeout=30, compression=compression):
            print(compression.name, event.sequence, event.type, event.WhichOneof("payload"))
            last = event
        if last is None or last.type != "execution.completed":
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
