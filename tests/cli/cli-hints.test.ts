import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CLI } from "@/cli/errors";
import { eventLine, nextSteps } from "@/cli/format";
import type { Run, RunEvent } from "@/cli/types";
import { runConfigSchema } from "@/lib/workflow/config";
import { cli, freshHome } from "./helpers";

/* Issue #32, finding 8: the CLI's hints said `gatehouse approve …`, "command not found" without npx; the README's CLI
   section named a config file that did not exist. */

const ROOT = path.resolve(import.meta.dirname, "../..");

/** Every command a hint suggests: each `gatehouse <subcommand>` occurrence with what precedes it. */
const suggested = (text: string) => [...text.matchAll(/(\S*) ?gatehouse (approve|edit|reject|answer|fix|retry|cancel|login|runs|projects|logs|watch|run)\b/g)];

describe("the CLI's hints name the command a person can run", () => {
  it("is `npx gatehouse`, which resolves to this package's bin in a checkout", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { bin: Record<string, string> };
    expect(CLI).toBe("npx gatehouse");
    expect(fs.existsSync(path.join(ROOT, pkg.bin.gatehouse!))).toBe(true);
  });

  it("what to type next for every waiting state and a question, always `npx gatehouse …`", () => {
    const base = { id: "run_1", pendingGate: null, pendingClarification: { clarificationId: "clr_1" }, pauseReason: null };
    const lines = (["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"] as const).map(
      (status) => nextSteps({ ...base, status } as unknown as Pick<Run, "id" | "status" | "pendingGate" | "pendingClarification" | "pauseReason">)!,
    );
    lines.push(eventLine({ type: "CLARIFICATION_REQUESTED", payload: { stage: "planning", question: "Which?", clarificationId: "clr_1" } } as unknown as RunEvent)!);
    const hints = lines.flatMap(suggested);
    expect(hints.length).toBeGreaterThanOrEqual(8);
    for (const [whole, before] of hints) expect(before, whole).toBe("npx");
  });

  it("an error's advice (not logged in) names `npx gatehouse login`", async () => {
    const home = freshHome();
    const out = await cli(["runs"], { env: { HOME: home, XDG_CONFIG_HOME: path.join(home, ".config") } });
    expect(out.code).toBe(3);
    expect(out.stderr).toContain("run `npx gatehouse login --url <server> --token <api token>`");
    for (const [whole, before] of suggested(out.stderr)) expect(before, whole).toBe("`npx");
  });

  it("--help shows the usage as `npx gatehouse`", async () => {
    const out = await cli(["--help"], { env: {} });
    expect(out.stdout).toMatch(/^Usage: npx gatehouse /);
  });
});

describe("the README's CLI section", () => {
  const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## The command line (`gatehouse`)"), readme.indexOf("## The VS Code extension"));

  it("names config files that ship with the repository and are valid run configs", () => {
    const files = [...section.matchAll(/--config ([\w./-]+\.json)/g)].map((m) => m[1]!);
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const full = path.join(ROOT, file);
      expect(fs.existsSync(full), file).toBe(true);
      expect(runConfigSchema.safeParse(JSON.parse(fs.readFileSync(full, "utf8"))).success, file).toBe(true);
    }
  });

  it("logs in with what the Quick start gives (a token from the dashboard), not an unset variable", () => {
    expect(section).not.toMatch(/\$GATEHOUSE_ADMIN_TOKEN/);
    expect(section).toMatch(/Settings → API tokens/);
  });
});
