/** How a partitioned service's operations know which agents this replica answers for (services/platform/api/serve.ts). */
import { replicaQueue } from "../../../contracts/subjects.ts"
import type { PartitionOwner } from "../api/serve.ts"
import type { PartitionedViews } from "./partitioned-views.ts"

export const partitionOwner = (service: string, views: PartitionedViews): PartitionOwner => ({
  queue: replicaQueue(service, views.leases.replicaId),
  owns: views.owns,
  takes: views.takes,
  placement: views.placement,
  // The routes of a partition from when its lease is taken: a request that arrives while it catches up, or while
  // its lease lapses for a moment, waits for it to answer (serve.ts).
  taken: views.taken,
  watchTaken: views.watchTaken,
})
