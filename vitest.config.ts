import { defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"

/**
 * The workspace packages resolve to their sources here, as tsconfig.json's customConditions says. Without
 * "module": Node loads the dependencies, and a "module" export is often for bundlers only (@opentelemetry/*'s
 * has extensionless imports Node cannot follow).
 */
const conditions = ["working-memory-source", ...defaultServerConditions.filter((c) => c !== "module")]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    // The suites test behaviour on the offline embedder (no model files to set up, light on two cores);
    // the sentence model's own tests (test/embedders/sentence-embedder.test.ts) select it by name.
    // No metrics port unless a test asks for one (on a free port): the processes of parallel files would meet on 9464.
    env: { WM_EMBEDDER: process.env.WM_EMBEDDER ?? "offline", WM_METRICS_PORT: process.env.WM_METRICS_PORT ?? "0" },
    // On Qdrant (QDRANT_URL set), a collection prefix per test file.
    setupFiles: ["./test/support/qdrant-prefix.ts"],
    include: ["test/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/.git/**", "test/faults/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own nats-server; two cores run two files at a time.
    fileParallelism: true,
    maxWorkers: 2,
    reporters: ["default", "./test/support/summary-reporter.ts"],
  },
})
