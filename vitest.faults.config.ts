import { defineConfig } from "vitest/config"

/**
 * The fault suite (`npm run test:faults`): real nats-server processes and
 * real service processes are killed and restarted, so files run one at a time.
 */
export default defineConfig({
  test: {
    include: ["test/faults/**/*.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    teardownTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
    reporters: ["default", "./test/support/summary-reporter.ts"],
  },
})
