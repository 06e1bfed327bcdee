import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { expect } from "vitest";
import { getEnv } from "@/lib/env";
import { until } from "../workflow/harness";

/** Another process (the sqlite3 shell) takes the database's write lock and holds it until released. */
export async function lockDatabase(): Promise<{ release: () => Promise<void> }> {
  const file = getEnv().databaseUrl.replace(/^file:/, "");
  const shell: ChildProcessWithoutNullStreams = spawn("sqlite3", [file]);
  let out = "";
  shell.stdout.on("data", (d: Buffer) => (out += d.toString()));
  shell.stderr.on("data", (d: Buffer) => (out += d.toString()));
  // With a busy timeout of its own: a write of the run in progress at this moment delays the lock, not refuses it.
  shell.stdin.write(".timeout 30000\nBEGIN IMMEDIATE;\nSELECT 'holding';\n");
  await until(async () => out.includes("holding") || out.includes("Error"), "the lock");
  expect(out).not.toContain("Error");
  expect(out).toContain("holding");
  return {
    release: async () => {
      shell.stdin.end("COMMIT;\n.quit\n");
      await new Promise((r) => shell.once("exit", r));
    },
  };
}
