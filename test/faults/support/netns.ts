/**
 * A small network of Linux network namespaces for partition tests (iproute2, root): one namespace
 * per node, each with one address on a bridge in a hub namespace of its own, and one veth into the
 * calling process's namespace (the test and its services, the "clients"). Everything the test adds
 * lives in namespaces and interfaces it created, on a /24 of its own in 10.64.0.0/10; `remove()`
 * deletes them. Cutting a node sets its bridge port down: it then reaches neither the other nodes nor
 * the clients, and its TCP connections stall rather than reset, as in a real partition.
 */
import { execFileSync } from "node:child_process"
import { randomInt } from "node:crypto"

export interface NamespaceNode {
  /** The namespace the node's processes run in. */
  readonly namespace: string
  /** The node's address, reachable from the clients while the node is not cut off. */
  readonly address: string
  /** The command prefix that runs a program inside the namespace. */
  readonly command: ReadonlyArray<string>
}

export interface NamespaceNetwork {
  readonly nodes: ReadonlyArray<NamespaceNode>
  /** The clients' address on the same network. */
  readonly clientAddress: string
  /** Cuts node `i` off from the others and from the clients. */
  readonly cut: (i: number) => void
  /** Joins node `i` to the network again. */
  readonly heal: (i: number) => void
  readonly remove: () => void
}

const ip = (...args: string[]): void => {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] })
}

/**
 * Why namespaces cannot be made here, or undefined when they can: the partition test needs root (or
 * CAP_NET_ADMIN) and iproute2's `ip`.
 */
export const namespacesUnavailable = (): string | undefined => {
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" })
  } catch {
    return "iproute2's `ip` is not installed (Debian: apt-get install -y iproute2)"
  }
  const probe = `wmprobe${process.pid}`
  try {
    ip("netns", "add", probe)
    ip("netns", "del", probe)
    return undefined
  } catch (error) {
    return `network namespaces cannot be created here (root or CAP_NET_ADMIN is needed): ${String(error)}`
  }
}

export const createNamespaceNetwork = (size: number): NamespaceNetwork => {
  // Interface names are at most 15 characters: "wm" + 5 hex digits + a role.
  const id = randomInt(0, 0xfffff).toString(16).padStart(5, "0")
  const subnet = `10.${64 + randomInt(0, 64)}.${randomInt(0, 256)}`
  const hub = `wm${id}-hub`
  const hostVeth = `wm${id}c`
  const nodeNames = Array.from({ length: size }, (_, i) => `wm${id}-n${i + 1}`)
  const bridgePort = (i: number) => `wm${id}p${i + 1}`
  const created: string[] = []
  const remove = () => {
    for (const namespace of created.reverse()) {
      try {
        ip("netns", "del", namespace)
      } catch {
        // already gone
      }
    }
    created.length = 0
    // The clients' veth goes with its peer in the hub; deleting it here is for a hub that was never made.
    try {
      ip("link", "del", hostVeth)
    } catch {
      // already gone
    }
  }
  try {
    ip("netns", "add", hub)
    created.push(hub)
    ip("-n", hub, "link", "add", "br0", "type", "bridge")
    ip("-n", hub, "link", "set", "br0", "up")

    ip("link", "add", hostVeth, "type", "veth", "peer", "name", `wm${id}pc`)
    ip("link", "set", `wm${id}pc`, "netns", hub)
    ip("-n", hub, "link", "set", `wm${id}pc`, "master", "br0", "up")
    ip("addr", "add", `${subnet}.1/24`, "dev", hostVeth)
    ip("link", "set", hostVeth, "up")

    const nodes = nodeNames.map((namespace, i) => {
      ip("netns", "add", namespace)
      created.push(namespace)
      const inner = `wm${id}e${i + 1}`
      ip("link", "add", inner, "type", "veth", "peer", "name", bridgePort(i))
      ip("link", "set", inner, "netns", namespace)
      ip("link", "set", bridgePort(i), "netns", hub)
      ip("-n", hub, "link", "set", bridgePort(i), "master", "br0", "up")
      const address = `${subnet}.${11 + i}`
      ip("-n", namespace, "addr", "add", `${address}/24`, "dev", inner)
      ip("-n", namespace, "link", "set", inner, "up")
      ip("-n", namespace, "link", "set", "lo", "up")
      return { namespace, address, command: ["ip", "netns", "exec", namespace] }
    })
    return {
      nodes,
      clientAddress: `${subnet}.1`,
      cut: (i) => ip("-n", hub, "link", "set", bridgePort(i), "down"),
      heal: (i) => ip("-n", hub, "link", "set", bridgePort(i), "up"),
      remove,
    }
  } catch (error) {
    remove()
    throw error
  }
}
