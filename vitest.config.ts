import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
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
