import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

/*
 * The app (tests/workflow/fixtures/app-process.ts) in a child process on this test file's database, for tests that kill
 * it with SIGKILL and start it again. `node --import tsx` (not the tsx CLI, which forks): the pid killed is the app.
 */

/** What the app printed (its last 20 000 characters), kept for a test's failure message. */
const outputs = new WeakMap<ChildProcess, () => string>();

/**
 * A line for a failure message: whether the app is still running (and if not, how it ended), then the end of what it
 * printed. A test that times out waiting for the app says whether the app was stuck or gone.
 */
export function appReport(child: ChildProcess | null): string {
  if (!child) return "no app was started";
  const state = child.exitCode === null && child.signalCode === null ? "running" : `exited (${child.exitCode ?? child.signalCode})`;
  return `the app is ${state}; its last output:\n${outputs.get(child)?.() || "(none)"}`;
}

/** Start the app; resolves once it prints READY (within 60 s), rejects with its output if it exits or never does. */
export async function startAppProcess(armFile: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join("tests", "workflow", "fixtures", "app-process.ts"), "--arm", armFile], {
    env: { ...process.env, GATEHOUSE_TEST_KEEP_ENV: "1", LOG_LEVEL: "error" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  outputs.set(child, () => output.slice(-20_000));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the app did not start: ${output}`)), 60_000);
      child.stdout!.on("data", (d: Buffer) => {
        output = (output + d.toString()).slice(-40_000);
        if (output.includes("READY")) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.stderr!.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-40_000)));
      child.once("exit", (code, signal) => reject(new Error(`the app exited (${code ?? signal}) before it was ready: ${output}`)));
    });
  } catch (error) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    throw error;
  }
  return child;
}

/** Resolves once the child has exited (at once if it already has). */
export const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => child.once("exit", () => r()));
