/** The long-term projection alone, on the embedded store, against a server (no other service). */
import { Effect, Layer, ManagedRuntime } from "effect"
import { embeddedStoreLayer } from "../../services/memory/longterm/embedded-store.ts"
import { LongTerm } from "../../services/memory/longterm/longterm.ts"
import type { LongTermStore } from "../../services/memory/longterm/store.ts"
import { foundation } from "../../services/system.ts"
import { settingsFor } from "../faults/support/services.ts"

export const startLongTermAlone = async (url: string) => {
  const store = embeddedStoreLayer
  const runtime = ManagedRuntime.make(
    Layer.merge(
      LongTerm.everyPartition({ durable: false }).pipe(
        Layer.provide(Layer.merge(store, foundation(settingsFor(url)("wm-memory")))),
      ),
      store,
    ) as Layer.Layer<LongTerm | LongTermStore, unknown>,
  )
  await runtime.runPromise(Effect.void)
  return runtime
}
