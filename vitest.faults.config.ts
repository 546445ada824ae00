import { defineConfig } from "vitest/config"

/**
 * The fault suite (`npm run test:faults`): real nats-server processes and
 * real service processes are killed and restarted, so files run one at a time.
 */
export default defineConfig({
  test: {
    // The suites test behaviour on the offline embedder (no model files to set up, light on two cores);
    // the sentence model's own tests (test/embedders/sentence-embedder.test.ts) select it by name.
    // No metrics port unless a test asks for one (on a free port): the processes of parallel files would meet on 9464.
    env: { WM_EMBEDDER: process.env.WM_EMBEDDER ?? "offline", WM_METRICS_PORT: process.env.WM_METRICS_PORT ?? "0" },
    setupFiles: ["./test/support/qdrant-prefix.ts"],
    include: ["test/faults/**/*.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    teardownTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
    reporters: ["default", "./test/support/summary-reporter.ts"],
  },
})
