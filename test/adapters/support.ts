/** What the adapters' tests share: reading an agent's log, running an example as a user would. */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import type { EventOf, MemoryEventTag } from "../../contracts/events.ts"
import type { WorkingMemoryClient } from "../../sdk/client.ts"
import { readOwnEvents } from "../../sdk/own-events.ts"

const REPO = fileURLToPath(new URL("../..", import.meta.url))

/** A fresh agent id: each test gets its own agent, so tests in one file never see each other's entries. */
export const agentIdFor = (name: string) => `${name}-${randomBytes(4).toString("hex")}`

/** The agent's events of one type, in log order. */
export const eventsOf = async <T extends MemoryEventTag>(
  client: WorkingMemoryClient,
  agentId: string,
  tag: T,
): Promise<EventOf<T>[]> =>
  (await readOwnEvents(client, agentId)).flatMap(({ event }) => (event._tag === tag ? [event as EventOf<T>] : []))

/**
 * Runs `npm run example:<name>` against the system at `natsUrl`, as a child process, asynchronously: the
 * system's services run in the test's process and must go on answering. Resolves with its output.
 */
export const runExample = async (name: string, natsUrl: string): Promise<string> => {
  const { stdout } = await promisify(execFile)("npm", ["run", "--silent", `example:${name}`], {
    cwd: REPO,
    env: { ...process.env, NATS_URL: natsUrl },
    encoding: "utf8",
    timeout: 90_000,
  })
  return stdout
}
