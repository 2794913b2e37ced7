/**
 * A TypeScript client of model_runtime.v1 that keeps the service's contract: an execution is
 * a resumable stream, so an answer is never lost to a dropped connection or a restarted
 * server.
 *
 *     import { createGrpcTransport } from "@connectrpc/connect-node";
 *     import { Client, textRequest } from "@model-runtime/client";
 *
 *     const client = new Client(createGrpcTransport({ baseUrl: "http://127.0.0.1:50051" }));
 *     for await (const event of client.execute(textRequest("chat", "hello"))) {
 *       console.log(event.sequence, event.type);
 *     }
 *
 * `execute` and `watch` yield each event once: when a call breaks they open another, `Watch`
 * after the last sequence yielded (the same `Execute` again while no event came: the
 * request's idempotency key, given one if it has none, attaches it to the execution the
 * first call started), waiting 50 ms doubled up to 2 s or the server's
 * `grpc-retry-pushback-ms`, for up to `patience` without an event. The wire types are
 * generated from the repository's proto/ (buf.gen.yaml).
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";

import type { ExecutionEvent } from "./gen/model_runtime/v1/events_pb.js";
import type { Execution } from "./gen/model_runtime/v1/execution_pb.js";
import { Role } from "./gen/model_runtime/v1/input_pb.js";
import {
  ExecuteRequestSchema,
  ModelRuntime,
  type ExecuteRequest,
} from "./gen/model_runtime/v1/runtime_pb.js";

export * from "./gen/model_runtime/v1/events_pb.js";
export * from "./gen/model_runtime/v1/execution_pb.js";
export * from "./gen/model_runtime/v1/input_pb.js";
export * from "./gen/model_runtime/v1/runtime_pb.js";

/** The caller's mistakes and a missing execution: resuming cannot mend them. */
const FINAL = new Set<Code>([
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.Unauthenticated,
  Code.FailedPrecondition,
  Code.OutOfRange,
  Code.Unimplemented,
  Code.DeadlineExceeded,
]);

/** How long to keep trying, and how long to wait between tries (milliseconds). */
export interface Retry {
  patienceMs: number;
  firstWaitMs: number;
  maxWaitMs: number;
}

export const DEFAULT_RETRY: Retry = { patienceMs: 30_000, firstWaitMs: 50, maxWaitMs: 2_000 };

/** Told of each resume: the last sequence yielded, and what broke the call. */
export type OnResume = (lastSequence: bigint, cause: ConnectError) => void;

/** A request for `ability` with one user message of `text`. */
export function textRequest(ability: string, text: string): ExecuteRequest {
  return create(ExecuteRequestSchema, {
    ability,
    input: { messages: [{ role: Role.USER, content: [{ part: { case: "text", value: text } }] }] },
  });
}

/** Sets the protocol's deadline `ms` from now: the runtime holds the execution to it. */
export function deadlineIn(request: ExecuteRequest, ms: number): void {
  request.deadline = timestampFromMs(Date.now() + ms);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function pushbackMs(error: ConnectError): number | undefined {
  const value = error.metadata.get("grpc-retry-pushback-ms");
  const ms = value === null ? NaN : Number(value);
  return Number.isFinite(ms) ? Math.min(ms, 30_000) : undefined;
}

/** The calls of `ModelRuntime` on `transport`, with streams that resume. */
export class Client {
  readonly rpc;

  constructor(
    transport: Transport,
    readonly retry: Retry = DEFAULT_RETRY,
    readonly keys: boolean = true,
  ) {
    this.rpc = createClient(ModelRuntime, transport);
  }

  private wait(tries: number, error: ConnectError): number {
    return pushbackMs(error) ?? Math.min(this.retry.firstWaitMs * 2 ** Math.min(tries, 16), this.retry.maxWaitMs);
  }

  /** Runs `request`; yields its events, each once, to the terminal one. */
  execute(request: ExecuteRequest, onResume?: OnResume): AsyncGenerator<ExecutionEvent> {
    if (this.keys && request.idempotencyKey === "") {
      request.idempotencyKey = `client-${randomUUID()}`;
    }
    return this.follow(request, undefined, 0n, onResume);
  }

  /** The events of `executionId` after `afterSequence`, each once, to the end. */
  watch(executionId: string, afterSequence = 0n, onResume?: OnResume): AsyncGenerator<ExecutionEvent> {
    return this.follow(undefined, executionId, afterSequence, onResume);
  }

  private async *follow(
    request: ExecuteRequest | undefined,
    id: string | undefined,
    last: bigint,
    onResume?: OnResume,
  ): AsyncGenerator<ExecutionEvent> {
    let tries = 0;
    let failingSince: number | undefined;
    for (;;) {
      let cause: ConnectError;
      try {
        const call = id !== undefined
          ? this.rpc.watch({ executionId: id, afterSequence: last })
          : this.rpc.execute(request!);
        for await (const event of call) {
          if (event.sequence <= last) continue;
          last = event.sequence;
          id ??= event.executionId;
          tries = 0;
          failingSince = undefined;
          yield event;
          if (event.payload.case === "completed" || event.payload.case === "failed") return;
        }
        cause = new ConnectError("the call ended before its execution did", Code.Unavailable);
      } catch (error) {
        cause = ConnectError.from(error);
        if (FINAL.has(cause.code)) throw cause;
      }
      // Broken before the first event and without a key: never sent twice.
      if (id === undefined && request?.idempotencyKey === "") throw cause;
      failingSince ??= Date.now();
      const wait = this.wait(tries, cause);
      if (Date.now() - failingSince + wait > this.retry.patienceMs) throw cause;
      onResume?.(last, cause);
      await sleep(wait);
      tries += 1;
    }
  }

  /** Starts `request`; retried on UNAVAILABLE and RESOURCE_EXHAUSTED after the pushback. */
  async submit(request: ExecuteRequest): Promise<Execution> {
    if (this.keys && request.idempotencyKey === "") {
      request.idempotencyKey = `client-${randomUUID()}`;
    }
    const start = Date.now();
    for (let tries = 0; ; tries += 1) {
      try {
        return await this.rpc.submit(request);
      } catch (error) {
        const cause = ConnectError.from(error);
        const retriable = cause.code === Code.Unavailable || cause.code === Code.ResourceExhausted;
        const wait = this.wait(tries, cause);
        if (!retriable || request.idempotencyKey === "" || Date.now() - start + wait > this.retry.patienceMs) {
          throw cause;
        }
        await sleep(wait);
      }
    }
  }

  get(executionId: string): Promise<Execution> {
    return this.rpc.getExecution({ executionId });
  }

  cancel(executionId: string, reason = ""): Promise<Execution> {
    return this.rpc.cancelExecution({ executionId, reason });
  }
}
