/** Prints one plain closing line CI can read: "N passed, N failed[, N skipped]". */
import type { Reporter, TestModule } from "vitest/node"

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else skipped++
      }
      // A file that failed to load, or a hook that failed, leaves no failed test behind: count it as one.
      const failedTests = Array.from(module.children.allTests()).filter((t) => t.result().state === "failed").length
      if (module.state() === "failed" && failedTests === 0) failed++
    }
    failed += unhandledErrors.length
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}\n`)
  }
}
