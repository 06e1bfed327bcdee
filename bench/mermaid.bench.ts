import { performance } from "node:perf_hooks";
import { fmt, percentile, printTable } from "./lib";

/** Mermaid: the first parse (loads mermaid under a DOM shim) versus later parses on the cached instance. */
export async function run() {
  const { extractConstraints } = await import("@/lib/mermaid");
  const seed = "flowchart TD\n  A[Login Page] --> B{Authenticated?}\n  B -->|Yes| C[Dashboard]\n  B -->|No| D[Error Page]";
  let t = performance.now();
  await extractConstraints(seed);
  const first = performance.now() - t;
  const samples: number[] = [];
  for (let i = 0; i < 200; i++) {
    t = performance.now();
    await extractConstraints(seed.replace("Dashboard", `Dashboard ${i}`));
    samples.push(performance.now() - t);
  }
  printTable([
    { case: "first parse (cold)", ms: fmt(first) },
    { case: "parse + extract p50 (warm)", ms: fmt(percentile(samples, 50)) },
    { case: "parse + extract p95 (warm)", ms: fmt(percentile(samples, 95)) },
  ]);
}
