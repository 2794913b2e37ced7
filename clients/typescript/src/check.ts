/**
 * The TypeScript client against the real binary, as CI runs it
 * (`node clients/typescript/dist/check.js target/debug/model-runtime`): an `execute` stream
 * over gRPC whose server is killed mid-answer and started again on the same address and file
 * store goes on, every event once; then the same API over gRPC-Web (connect's transport, the
 * protocol a browser's client speaks) on the HTTP ingress's port.
 */
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Client, deadlineIn, textRequest, type ExecutionEvent } from "./index.js";

const KEY = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";
const PROMPT = Array.from({ length: 40 }, (_, n) => `w${n}`).join(" ");

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject()));
    });
  });
}

/** `serve` on `grpc` with `config`, once its log says both listeners serve. */
function serve(binary: string, config: string, grpc: string): Promise<ChildProcess> {
  const server = spawn(binary, ["serve", "--listen", grpc, "--config", config], {
    env: { ...process.env, MODEL_RUNTIME_CLIENT_CHECK_KEY: KEY },
    stdio: ["ignore", "ignore", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${log}`)), 20_000);
    server.stderr!.on("data", (chunk) => {
      log += chunk;
      if (log.includes("model-runtime serving") && log.includes("HTTP ingress serving")) {
        clearTimeout(timer);
        resolve(server);
      }
    });
  });
}

function stopped(server: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  return new Promise((resolve) => {
    server.once("exit", () => resolve());
    server.kill(signal);
  });
}

function fail(message: string): never {
  console.log(`FAIL ${message}`);
  process.exit(1);
}

async function main(): Promise<void> {
  const binary = process.argv[2] ?? "target/debug/model-runtime";
  const dir = mkdtempSync(join(tmpdir(), "mr-ts-"));
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const grpc = `127.0.0.1:${grpcPort}`;
  const config = join(dir, "config.toml");
  const base = readFileSync(new URL("../../../scripts/python_client.toml", import.meta.url), "utf8");
  writeFileSync(
    config,
    base.replace('kind = "file"', `kind = "file"\npath = "${dir}/journal"`) +
      `\n[ingress]\nlisten = "127.0.0.1:${httpPort}"\n`,
  );
  let server = await serve(binary, config, grpc);
  try {
    const client = new Client(createGrpcTransport({ baseUrl: `http://${grpc}` }));
    const request = textRequest("chat", PROMPT);
    deadlineIn(request, 60_000);
    const seen: ExecutionEvent[] = [];
    const resumes: bigint[] = [];
    for await (const event of client.execute(request, (last) => resumes.push(last))) {
      seen.push(event);
      if (seen.length === 6) {
        await stopped(server, "SIGKILL");
        server = await serve(binary, config, grpc);
      }
    }
    const sequences = seen.map((e) => Number(e.sequence));
    if (sequences.some((s, i) => s !== i + 1)) fail(`resumed events are not 1..n once each: ${sequences}`);
    const end = seen[seen.length - 1]!.payload.case;
    if (end !== "completed" && end !== "failed") fail(`the stream ended on ${end}`);
    if (resumes.length === 0) fail("the stream was never resumed");
    console.log(`ok   killed after 6 events and restarted: resumed after ${resumes[0]}, ${seen.length} events each once, ending ${seen[seen.length - 1]!.type}`);

    // gRPC-Web on the ingress's port: a browser's protocol, the same API.
    const web = new Client(createGrpcWebTransport({ baseUrl: `http://127.0.0.1:${httpPort}`, httpVersion: "1.1" }));
    const events: ExecutionEvent[] = [];
    for await (const event of web.execute(textRequest("chat", "hello over grpc-web"))) events.push(event);
    const text = events.flatMap((e) => (e.payload.case === "textDelta" ? [e.payload.value.text] : [])).join("");
    if (events[events.length - 1]?.payload.case !== "completed" || text !== "hello over grpc-web") {
      fail(`gRPC-Web: ${events.map((e) => e.type)} ${JSON.stringify(text)}`);
    }
    const cancelled = await web.cancel((await web.submit(textRequest("chat", PROMPT))).executionId, "from typescript");
    console.log(`ok   gRPC-Web: ${events.length} events to the end; submit and cancel (${cancelled.executionId})`);
  } finally {
    await stopped(server, "SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => fail(String(error)));
