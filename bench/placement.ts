/**
 * How evenly three replicas divide a fleet's agents, by the placement's own functions, over many fleets:
 *
 *   npm run bench:placement [-- --fleets 20,30,50,100,300 --trials 20000 --out bench/results/placement.json]
 *
 * Each trial places a fleet of random agent ids on the 16 partitions (contracts/partitions.ts) and starts
 * one replica holding every partition; two replicas with random ids join and the first gives partitions
 * up. Then, in every replica's order of preference (leases.ts), as the leases do it:
 *
 * - before: the first keeps its first six; the joiners take the rest, the first of them to land its round
 *   taking as many as it lacks (six), the other what is left (the split the replica test saw: 6, 6 and 4);
 * - now (services/platform/partitions/shares.ts): the first keeps the six `partitionsToKeep` chooses by
 *   their agents; each joiner takes five at once, so the other ends with five too.
 *
 * A request goes where its agent's partition is, so a replica's share of the agents is its share of the
 * requests of a fleet whose agents step alike. Reported per fleet size: the mean and the worst largest
 * share, and how often it is at most 1/3 + 0.05 (the target for three replicas).
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { PARTITIONS, placementRow, REPLICAS, TARGET } from "./placement/simulate.ts"

const { values } = parseArgs({
  options: {
    fleets: { type: "string", default: "20,30,50,100,300" },
    trials: { type: "string", default: "20000" },
    out: { type: "string" },
  },
})

const trials = Number(values.trials)
const rows = values.fleets.split(",").map((n) => placementRow(Number(n), trials))
console.log(
  `largest share of a fleet's agents at one of 3 replicas, ${trials} fleets each (target ≤ ${TARGET.toFixed(3)})`,
)
console.log("agents  before: mean / worst / within target   now: mean / worst / within target")
for (const { fleet, before, now } of rows)
  console.log(
    `${String(fleet).padStart(6)}  ${before.meanLargestShare} / ${before.worstLargestShare} / ${before.withinTarget}` +
      `             ${now.meanLargestShare} / ${now.worstLargestShare} / ${now.withinTarget}`,
  )
if (values.out)
  writeFileSync(
    values.out,
    `${JSON.stringify({ partitions: PARTITIONS, replicas: REPLICAS, trials, rows }, null, 2)}\n`,
  )
