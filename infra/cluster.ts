/**
 * A three-node JetStream cluster on loopback, for running a fleet on one machine:
 *
 *   node infra/cluster.ts [--data-dir .data/cluster] [--port 4222] [--nodes 3]
 *
 * Client ports --port, --port+1, …; route ports 2000 above them. Prints the NATS_URL and
 * WM_STREAM_REPLICAS the services need, and runs until interrupted (the stores are kept).
 */
import { join } from "node:path"
import { parseArgs } from "node:util"
import { startNatsCluster } from "./nats-server.ts"

const { values } = parseArgs({
  options: {
    "data-dir": { type: "string", default: join(process.cwd(), ".data", "cluster") },
    port: { type: "string", default: "4222" },
    nodes: { type: "string", default: "3" },
  },
})
const nodes = Number(values.nodes)
const port = Number(values.port)
if (!Number.isInteger(nodes) || nodes < 1) throw new Error(`--nodes must be a positive integer, not '${values.nodes}'`)
if (!Number.isInteger(port) || port < 1 || port > 63_000) throw new Error(`--port must be a port, not '${values.port}'`)

const cluster = await startNatsCluster(nodes, "wm", { firstPort: port, dataDir: values["data-dir"] })
process.stdout.write(
  `NATS_URL=${cluster.servers.join(",")}\nWM_STREAM_REPLICAS=${Math.min(3, nodes)}\n(stores in ${values["data-dir"]}; Ctrl-C stops the nodes)\n`,
)
const stop = () => void cluster.stop().then(() => process.exit(0))
process.on("SIGINT", stop)
process.on("SIGTERM", stop)
