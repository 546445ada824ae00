/**
 * Distributed traces: a call made through the SDK within an OpenTelemetry span is one trace across the
 * SDK, the working service and the memory service it recalls through; the event a traced request appends
 * keeps the trace context, readable through `view.events`; a request without one starts its own trace.
 * Against a real nats-server with every service running and exporting its spans over OTLP/HTTP to a
 * collector stand-in; the caller's spans go to an in-memory exporter.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { context, type Span, trace } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningServices, startSystemWithEnv } from "../support/system.ts"

/** A span as OTLP/JSON sends it. */
interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<Attribute>
  /** The `service.name` of the resource it came with. */
  readonly service?: string | undefined
}
interface Attribute {
  readonly key: string
  readonly value: { readonly stringValue?: string }
}
const SERVER = 2

/** What a collector would receive on /v1/traces, kept in memory. */
const startCollector = async () => {
  const spans: ExportedSpan[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: Array<{
            resource: { attributes: ReadonlyArray<Attribute> }
            scopeSpans: Array<{ spans: ExportedSpan[] }>
          }>
        }
        for (const { resource, scopeSpans } of body.resourceSpans) {
          const service = resource.attributes.find((a) => a.key === "service.name")?.value.stringValue
          for (const scope of scopeSpans) spans.push(...scope.spans.map((span) => ({ ...span, service })))
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, spans, close: () => new Promise((r) => server.close(r)) }
}

/** The spans above `span` in its trace, nearest first, as far as they have arrived. */
const ancestors = (spans: ReadonlyArray<ExportedSpan>, span: ExportedSpan): string[] => {
  const parent = spans.find((s) => s.traceId === span.traceId && s.spanId === span.parentSpanId)
  return parent === undefined ? [] : [parent.spanId, ...ancestors(spans, parent)]
}

const attribute = (span: ExportedSpan, key: string) => span.attributes.find((a) => a.key === key)?.value.stringValue

let collector: Awaited<ReturnType<typeof startCollector>>
let server: NatsServerProcess
let services: RunningServices
let client: WorkingMemoryClient
const callerSpans = new InMemorySpanExporter()
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(callerSpans)] }).getTracer("caller")
const contextManager = new AsyncLocalStorageContextManager()

beforeAll(async () => {
  context.setGlobalContextManager(contextManager.enable())
  collector = await startCollector()
  server = await startNatsServer()
  const env = {
    ...process.env,
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  }
  services = await startSystemWithEnv(server.url, env)
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 5_000 })
}, 120_000)

afterAll(async () => {
  await client?.close()
  await services?.stop()
  await server?.stop()
  await collector?.close()
  context.disable()
})

/** Runs `f` in a caller span of its own and gives back its result with the span. */
const inCallerSpan = <A>(name: string, f: () => Promise<A>): Promise<{ result: A; span: Span }> =>
  tracer.startActiveSpan(name, async (span) => {
    try {
      return { result: await f(), span }
    } finally {
      span.end()
    }
  })

const traceparentParts = (traceparent: string) => {
  const [, traceId, spanId] = traceparent.split("-")
  return { traceId: traceId!, spanId: spanId! }
}

describe("distributed traces", () => {
  it("a context build made in a caller's span is one trace across the SDK, the working and the memory service", async () => {
    const agent = client.agent("traced-build")
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: "The launch review moved to Thursday at ten." })
    // A focused step: its first build asks the memory service to recall cues for the focus.
    const { stepId } = await agent.beginStep({ focus: { query: "when is the launch review?" } })

    const { result: built, span: caller } = await inCallerSpan("plan the next answer", () =>
      agent.buildContext({ stepId }),
    )
    expect(built.text).toContain("launch review")
    const { traceId, spanId: callerSpanId } = caller.spanContext()
    expect(callerSpans.getFinishedSpans().map((s) => s.spanContext().traceId)).toContain(traceId)

    const inTrace = () => collector.spans.filter((s) => s.traceId === traceId)
    const build = await eventually("the working service's span", () =>
      inTrace().find((s) => s.name === "wm.context.build"),
    )
    const recall = await eventually("the memory service's span", () =>
      inTrace().find((s) => s.name === "wm.step.recall"),
    )

    // The working service's span is the child of the caller's, the memory service's a descendant of it.
    expect(build).toMatchObject({ kind: SERVER, parentSpanId: callerSpanId })
    expect(build.service).toBe("wm-working")
    expect(attribute(build, "wm.agent_id")).toBe("traced-build")
    expect(recall.kind).toBe(SERVER)
    expect(recall.service).toBe("wm-memory")
    await eventually("the spans between the build and the recall", () =>
      ancestors(collector.spans, recall).includes(build.spanId) ? true : undefined,
    )

    // The build's own event is applied by the working projection in the same trace.
    const applied = await eventually("the working projection's apply", () =>
      inTrace().find((s) => s.name === "wm.apply.working" && attribute(s, "wm.event") === "EntriesRead"),
    )
    await eventually("the apply's parents", () =>
      ancestors(collector.spans, applied).includes(build.spanId) ? true : undefined,
    )
  }, 90_000)

  it("an entry recorded in a caller's span keeps the trace in its event, read back through view.events", async () => {
    const agent = client.agent("traced-record")
    await agent.register({ role: "main" })
    const { result: recorded, span: caller } = await inCallerSpan("remember the user's answer", () =>
      agent.record({ origin: "USER", content: "My cat is called Miso." }),
    )
    const { events } = await client.call("traced-record", "readEvents", {})
    const stored = events.find(
      (e) =>
        (e.event as { _tag?: string; entryId?: string })._tag === "EntryRecorded" &&
        (e.event as { entryId?: string }).entryId === recorded.entryId,
    )
    expect(stored?.traceparent).toBeDefined()
    const { traceId, spanId } = traceparentParts(stored!.traceparent!)
    expect(traceId).toBe(caller.spanContext().traceId)

    // The event names a span of the request's trace: an audit joins the two on it.
    const appendedIn = await eventually("the span the event names", () =>
      collector.spans.find((s) => s.traceId === traceId && s.spanId === spanId),
    )
    const record = await eventually("the gateway's span", () =>
      collector.spans.find((s) => s.traceId === traceId && s.name === "wm.entry.record"),
    )
    expect(record.parentSpanId).toBe(caller.spanContext().spanId)
    // The gateway's span, or one within it.
    await eventually("the spans between the request and the append", () =>
      appendedIn.spanId === record.spanId || ancestors(collector.spans, appendedIn).includes(record.spanId)
        ? true
        : undefined,
    )
    // The projections that fold the event apply it within the same trace.
    await eventually("the long-term projection's apply", () =>
      collector.spans.find((s) => s.traceId === traceId && s.name.startsWith("wm.apply.longterm")),
    )
  }, 90_000)

  it("a request without a trace context is answered and starts a trace of its own", async () => {
    expect(trace.getActiveSpan()).toBeUndefined()
    const agent = client.agent("untraced-record")
    await agent.register({ role: "main" })
    const recorded = await agent.record({ origin: "USER", content: "Nobody traces this one." })
    const { events } = await client.call("untraced-record", "readEvents", {})
    const stored = events.find((e) => (e.event as { entryId?: string }).entryId === recorded.entryId)
    expect(stored?.traceparent).toBeDefined()
    const { traceId } = traceparentParts(stored!.traceparent!)
    const callers = new Set(callerSpans.getFinishedSpans().map((s) => s.spanContext().traceId))
    expect(callers.has(traceId)).toBe(false)
    const root = await eventually("the request's own span", () =>
      collector.spans.find((s) => s.traceId === traceId && s.name === "wm.entry.record"),
    )
    expect(root.parentSpanId ?? "").toBe("")
  }, 90_000)
})
