import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { Inngest } from "inngest";
import { serve } from "inngest/edge";
import { afterAll, describe, expect, it } from "vitest";
import { getEnv, parseEnv } from "@/lib/env";
import type { FetchHandler } from "@/lib/executor";
import { EXECUTOR_KEY_HEADER, getExecutorKey } from "@/lib/security/executor-key";
import { secretFingerprint, workerEnvRefusal } from "@/lib/security/worker-start";
import { startServer, waitFor } from "./harness";

/**
 * `npm run worker` as other Inngest apps use it (README "The embedded executor"): it refuses an app's INNGEST_* settings
 * that would make it answer 404 to every event, says at start which key `/e/<key>` takes and where it is kept, and an
 * app configured as the README says sends an event that starts a run.
 */

const root = path.resolve(import.meta.dirname, "../..");
const children: ChildProcess[] = [];
const servers: Awaited<ReturnType<typeof startServer>>[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  for (const s of servers) await s.close();
});

type Started = { origin: string; out: () => string; child: ChildProcess };

/** The worker on this test's data directory and database, with `extraEnv`; resolves at READY or at its exit. */
function spawnWorker(args: string[], extraEnv: Record<string, string>): Promise<Started | { exitCode: number | null; out: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join("scripts", "worker.ts"), "--port", "0", "--poll-ms", "100", ...args], {
    cwd: root,
    env: { ...process.env, ...extraEnv },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker neither started nor exited: ${out}`)), 45_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ origin: `http://127.0.0.1:${m[1]}`, out: () => out, child });
      }
    });
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ exitCode: code, out });
    });
  });
}

describe("npm run worker with other Inngest apps", () => {
  it("refuses to start with INNGEST_EVENT_KEY (an app's setting that would make /e/<key> a 404), naming it and what to do", async () => {
    const result = await spawnWorker(["--app", "http://127.0.0.1:9/api/inngest"], {
      INNGEST_DEV: "http://127.0.0.1:8288",
      INNGEST_EVENT_KEY: "app-side-event-key",
    });
    expect("exitCode" in result && result.exitCode).toBe(2);
    const out = "exitCode" in result ? result.out : "";
    expect(out).toContain("will not start: INNGEST_EVENT_KEY is set");
    expect(out).toContain("answers 404 to every event");
    expect(out).toContain("Unset INNGEST_EVENT_KEY");
    expect(out).not.toContain("READY");
  });

  it("each variable that switches to Inngest mode is refused by name; INNGEST_DEV alone is not", () => {
    const base = { GATEHOUSE_DATA_DIR: getEnv().dataDir };
    for (const [name, value] of [["INNGEST_EVENT_KEY", "k"], ["INNGEST_SIGNING_KEY", "signkey-prod-00"], ["INNGEST_BASE_URL", "http://127.0.0.1:8288"]] as const) {
      expect(workerEnvRefusal(parseEnv({ ...base, [name]: value }))).toContain(`will not start: ${name} is set`);
    }
    expect(workerEnvRefusal(parseEnv({ ...base, INNGEST_EVENT_KEY: "k", INNGEST_BASE_URL: "http://127.0.0.1:8288" }))).toContain(
      "INNGEST_EVENT_KEY, INNGEST_BASE_URL are set",
    );
    expect(workerEnvRefusal(parseEnv({ ...base, INNGEST_DEV: "1", INNGEST_ENV: "x" }))).toBeUndefined();
  });

  it("an app set up as the README says (INNGEST_DEV, INNGEST_EVENT_KEY; signed: INNGEST_SIGNING_KEY) sends an event that starts a run", async () => {
    const signingKey = `signkey-prod-${"5e".repeat(32)}`;
    const ran: string[] = [];
    const build = (id: string, options: ConstructorParameters<typeof Inngest>[0]) => {
      const inngest = new Inngest(options);
      const fn = inngest.createFunction({ id: "greet", triggers: [{ event: `${id}/hello` }] }, async ({ event, step }) => {
        return step.run("record", () => {
          ran.push(`${id}:${event.data.n}`);
          return event.data.n;
        });
      });
      return { inngest, handler: serve({ client: inngest, functions: [fn] }) as FetchHandler };
    };
    const devServer = await startServer();
    const signedServer = await startServer();
    servers.push(devServer, signedServer);

    const started = await spawnWorker(["--app", devServer.serveUrl, "--app", signedServer.serveUrl], {
      INNGEST_DEV: "1",
      GATEHOUSE_EXECUTOR_SIGNING_KEY: signingKey,
    });
    if ("exitCode" in started) throw new Error(`worker exited ${started.exitCode}: ${started.out}`);
    const key = getExecutorKey();
    const banner = started.out();
    // Which key /e/<key> takes and where it is kept, never the key itself.
    expect(banner).toContain(`takes only the executor key (${secretFingerprint(key)}), kept in ${path.join(getEnv().dataDir, "executor-key")}`);
    expect(banner).toContain(`INNGEST_DEV=${started.origin} and INNGEST_EVENT_KEY=<executor key>`);
    expect(banner).toContain(`INNGEST_SIGNING_KEY=GATEHOUSE_EXECUTOR_SIGNING_KEY (${secretFingerprint(signingKey)})`);
    expect(banner).toContain("ignored here (an app's settings): INNGEST_DEV");
    expect(banner).not.toContain(key);
    expect(banner).not.toContain(signingKey);

    // INNGEST_DEV=<origin> + INNGEST_EVENT_KEY=<executor key>, as the SDK reads them.
    const dev = build("dev-app", { id: "dev-app", isDev: true, baseUrl: started.origin, eventKey: key });
    devServer.setHandler(dev.handler);
    // Signed: INNGEST_BASE_URL=<origin>, INNGEST_EVENT_KEY=<executor key>, INNGEST_SIGNING_KEY=<GATEHOUSE_EXECUTOR_SIGNING_KEY>.
    const signed = build("signed-app", { id: "signed-app", isDev: false, baseUrl: started.origin, eventKey: key, signingKey });
    signedServer.setHandler(signed.handler);

    // The apps were unreachable (503) at the worker's first sync; it retries with backoff: wait until both synced.
    await waitFor(
      async () => {
        const health = (await (await fetch(`${started.origin}/health`, { headers: { [EXECUTOR_KEY_HEADER]: key } })).json()) as { apps: { functions?: number; error?: string }[] };
        return health.apps.length === 2 && health.apps.every((a) => !a.error && (a.functions ?? 0) > 0);
      },
      { what: "both apps to sync", timeoutMs: 40_000 },
    );
    await dev.inngest.send({ name: "dev-app/hello", data: { n: 1 } });
    await signed.inngest.send({ name: "signed-app/hello", data: { n: 2 } });
    // INNGEST_DEV alone (what the README used to say): the SDK sends to a placeholder key, refused.
    const keyless = new Inngest({ id: "keyless-app", isDev: true, baseUrl: started.origin });
    await expect(keyless.send({ name: "dev-app/hello", data: { n: 3 } })).rejects.toThrow(/401|not recognised/i);
    await waitFor(async () => ran.includes("dev-app:1") && ran.includes("signed-app:2"), { what: "both events to start a run", timeoutMs: 40_000 });
    expect(ran).not.toContain("dev-app:3");
  });
});
