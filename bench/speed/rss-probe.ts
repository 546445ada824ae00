/**
 * Preloaded into a service process (`node --import bench/speed/rss-probe.ts
 * services/…/main.ts`) so that the benchmark can ask it, over the IPC
 * channel, for its peak resident set size. Changes nothing else.
 */
process.on("message", (message: unknown) => {
  if (message === "maxRss") process.send?.({ maxRssKb: process.resourceUsage().maxRSS })
})
// Do not keep a process alive that would otherwise exit.
process.channel?.unref()
