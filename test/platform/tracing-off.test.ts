/**
 * With span export off (no OTEL_EXPORTER_OTLP_ENDPOINT): a request without a trace context appends its
 * event as before, with no trace context, while a caller's sampled trace is still kept on the event it
 * appends, so its audit joins the caller's own spans. Against a real nats-server with every service running.
 */
import { context, trace } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { type RunningServices, startSystemWithEnv } from "../support/system.ts"

let server: NatsServerProcess
let services: RunningServices
let client: WorkingMemoryClient
const tracer = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())],
}).getTracer("caller")

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  server = await startNatsServer()
  const env = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: undefined }
  services = await startSystemWithEnv(server.url, env)
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 5_000 })
}, 120_000)

afterAll(async () => {
  await client?.close()
  await services?.stop()
  await server?.stop()
  context.disable()
})

const storedEvent = async (agentId: string, entryId: string) => {
  const { events } = await client.call(agentId, "readEvents", {})
  return events.find((e) => (e.event as { entryId?: string }).entryId === entryId)
}

describe("traces with export off", () => {
  it("untraced requests' events carry no trace context", async () => {
    expect(trace.getActiveSpan()).toBeUndefined()
    const agent = client.agent("untraced-off")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: "Nothing traces this." })
    expect(await storedEvent("untraced-off", entryId)).toBeDefined()
    const { events } = await client.call("untraced-off", "readEvents", {})
    expect(events.filter((e) => e.traceparent !== undefined)).toEqual([])
  })

  it("a traced caller's trace is kept on its event", async () => {
    const agent = client.agent("traced-off")
    await agent.register({ role: "main" })
    const { entryId, traceId } = await tracer.startActiveSpan("caller", async (span) => {
      const recorded = await agent.record({ origin: "USER", content: "The caller traces this." })
      span.end()
      return { entryId: recorded.entryId, traceId: span.spanContext().traceId }
    })
    const stored = await storedEvent("traced-off", entryId)
    expect(stored?.traceparent?.split("-")[1]).toBe(traceId)
  })
})
