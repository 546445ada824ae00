/**
 * One typed call between services: the reply is decoded with the operation's response schema, a refusal
 * into its typed API error, and a reply that is not the operation's, or none at all, says so.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { operations } from "../../contracts/api.ts"
import { Unavailable, UnknownEntries } from "../../contracts/errors.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { callOperation, NoAnswer } from "../../services/platform/api/call.ts"

let server: NatsServerProcess
let nc: NatsConnection
beforeAll(async () => {
  // A scripted service on the API subjects themselves: a server that does not route them by partition.
  server = await startNatsServer({ routing: false })
  nc = await connect({ servers: server.url })
  // A stand-in for the retrieval service's `step.recall`, answering by the step id it is asked about.
  nc.subscribe(apiSubject("*", operations.recall.subject), {
    callback: (_error, msg) => {
      const { stepId } = msg.json<{ stepId: string }>()
      if (stepId === "good") msg.respond(JSON.stringify({ ok: true, value: { cues: 2, seq: 41 } }))
      else if (stepId === "refused")
        msg.respond(JSON.stringify({ ok: false, error: { _tag: "UnknownEntries", entryIds: ["e-1"], message: "x" } }))
      else if (stepId === "wrong-shape") msg.respond(JSON.stringify({ ok: true, value: { cues: "two" } }))
      else msg.respond("not json")
    },
  })
  await nc.flush()
})
afterAll(async () => {
  await nc?.close()
  await server?.stop()
})

const call = (stepId: string) =>
  Effect.runPromise(Effect.flip(callOperation(nc, "a-1", "recall", { stepId }, { timeout: "2 seconds" })))

it("decodes the reply with the operation's response schema", async () => {
  await expect(Effect.runPromise(callOperation(nc, "a-1", "recall", { stepId: "good" }))).resolves.toEqual({
    cues: 2,
    seq: 41,
  })
})

it("decodes a refusal into the typed API error it names", async () => {
  const refusal = await call("refused")
  expect(refusal).toBeInstanceOf(UnknownEntries)
  expect(refusal).toMatchObject({ entryIds: ["e-1"] })
})

it("names a reply that is not the operation's, or not JSON, Unavailable", async () => {
  expect(await call("wrong-shape")).toBeInstanceOf(Unavailable)
  expect(await call("garbled")).toBeInstanceOf(Unavailable)
})

it("says NoAnswer when nobody serves the operation", async () => {
  const silence = await Effect.runPromise(
    Effect.flip(callOperation(nc, "a-1", "getRaw", { entryId: "e-1" }, { timeout: "200 millis" })),
  )
  expect(silence).toBeInstanceOf(NoAnswer)
})
