#!/usr/bin/env python3
"""The Python client (clients/python, installed with pip) against a server that is killed
mid-stream and started again on the same address and file store: its `execute` stream goes
on, every event once, to the execution's end. Then `submit`, `watch`, `get` and `cancel`.

    python3 scripts/python_client_check.py target/debug/model-runtime
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
from model_runtime_client import Client, deadline_in, execution_pb2, text_request

KEY = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"
PROMPT = " ".join(f"w{n}" for n in range(40))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(binary: str, config: str, addr: str) -> subprocess.Popen:
    """Starts the server and waits until it accepts connections: first its socket (polled,
    so the channel's first attempt does not fail and leave it in grpc's reconnect backoff),
    then a ready channel. On failure, says why with the server's log."""
    env = dict(os.environ, MODEL_RUNTIME_CLIENT_CHECK_KEY=KEY)
    log = tempfile.TemporaryFile()
    server = subprocess.Popen([binary, "serve", "--listen", addr, "--config", config],
                              env=env, stdout=subprocess.DEVNULL, stderr=log)
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise TimeoutError(f"the server did not listen on {addr}") from None
                time.sleep(0.05)
        channel = grpc.insecure_channel(addr)
        grpc.channel_ready_future(channel).result(timeout=20)
        channel.close()
    except Exception:
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace"))
        raise
    return server


def main() -> int:
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as dir:
        config = os.path.join(dir, "config.toml")
        with open(os.path.join(os.path.dirname(__file__), "python_client.toml")) as f:
            text = f.read().replace('kind = "file"', f'kind = "file"\npath = "{dir}/journal"')
        with open(config, "w") as f:
            f.write(text)
        addr = f"127.0.0.1:{free_port()}"
        server = serve(binary, config, addr)
        try:
            client = Client(grpc.insecure_channel(addr), patience=20)
            resumes = []
            request = text_request("chat", PROMPT)
            deadline_in(request, 60)
            seen = []
            for event in client.execute(request, on_resume=lambda last, e: resumes.append(last)):
                seen.append(event)
                if len(seen) == 6:
                    server.send_signal(signal.SIGKILL)
                    server.wait()
                    server = serve(binary, config, addr)
            sequences = [e.sequence for e in seen]
            if sequences != list(range(1, len(seen) + 1)) or seen[-1].WhichOneof("payload") not in ("completed", "failed"):
                print(f"FAIL the resumed stream is not 1..n once each, ending terminal: {sequences}")
                return 1
            if not resumes:
                print("FAIL the stream was never resumed")
                return 1
            print(f"ok   killed after 6 events and restarted: resumed after {resumes[0]}, "
                  f"{len(seen)} events each once, ending {seen[-1].type}")

            submitted = client.submit(text_request("chat", "one two three"))
            watched = list(client.watch(submitted.execution_id))
            if watched[-1].type != "execution.completed" or client.get(submitted.execution_id).state != execution_pb2.EXECUTION_STATE_SUCCEEDED:
                print(f"FAIL submit then watch: {[e.type for e in watched]}")
                return 1
            running = client.submit(text_request("chat", PROMPT))
            cancelled = client.cancel(running.execution_id, "from the python client")
            ended = list(client.watch(running.execution_id))[-1]
            if ended.failed.error.code != "cancelled":
                print(f"FAIL cancel: {cancelled.state} {ended}")
                return 1
            print("ok   submit, watch, get and cancel")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
