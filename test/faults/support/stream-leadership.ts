/**
 * The event stream's leadership in a cluster scenario: handing it to a named node (so that what the node
 * serves comes from its own store), and waiting until a node that was away is a current replica again.
 */
import type { JetStreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { expect } from "vitest"
import { EVENTS_STREAM } from "../../../contracts/subjects.ts"
import { eventually } from "../../support/eventually.ts"

const streamInfo = (jsm: JetStreamManager) =>
  eventually("stream info", () => jsm.streams.info(EVENTS_STREAM), 60_000, 250)

/**
 * Steps the stream's leader down, asking for `name` where the server supports a preferred placement
 * (2.11 and later; earlier ones pick at random), until `name` leads. Returns the step-downs it took.
 */
export const makeStreamLeader = async (nc: NatsConnection, jsm: JetStreamManager, name: string): Promise<number> => {
  let stepdowns = 0
  while ((await streamInfo(jsm)).cluster?.leader !== name) {
    expect(stepdowns, `leadership reached ${name}`).toBeLessThan(12)
    stepdowns++
    await nc
      .request(`$JS.API.STREAM.LEADER.STEPDOWN.${EVENTS_STREAM}`, JSON.stringify({ placement: { preferred: name } }), {
        timeout: 5_000,
      })
      .catch(() => undefined)
    await eventually(
      "a stream leader after the step-down",
      async () => ((await streamInfo(jsm)).cluster?.leader ? true : undefined),
      30_000,
      200,
    )
  }
  return stepdowns
}

/** Waits until node `name` leads the stream or is one of its replicas, current with no lag. */
export const untilCurrentReplica = (jsm: JetStreamManager, name: string) =>
  eventually(
    `${name} current in the stream's replica set`,
    async () => {
      const info = await jsm.streams.info(EVENTS_STREAM)
      const peer = [
        ...(info.cluster?.replicas ?? []),
        ...(info.cluster?.leader === name ? [{ name, current: true, lag: 0 }] : []),
      ].find((p) => p.name === name)
      return peer?.current === true && (peer.lag ?? 0) === 0 ? info : undefined
    },
    90_000,
    250,
  )
