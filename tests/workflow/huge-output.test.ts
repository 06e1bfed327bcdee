import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import * as diffRoute from "@/app/api/runs/[id]/diff/route";
import { runValidator } from "@/lib/agents/validator";
import { createScriptedModel, instructionText } from "@/lib/ai/scripted-model";
import { DIFF_LIMITS } from "@/lib/git/diff";
import { createSandbox, type RunSandbox } from "@/lib/sandbox";
import { scanChangesForSecrets } from "@/lib/runs/secret-scan";
import { ADMIN, call } from "../api/helpers";
import { makeRepo as makeGitRepo } from "../git/helpers";
import { planOf } from "../agents/helpers/plan";
import { FAKE } from "../security/fake-secrets";
import { git, launch, newProject, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";

/*
 * Issue #29, finding 5: a command's huge output is never read whole. A file over the diff's size limit is left out of
 * the text diff with a note naming it and its size, the diff is cut at its byte cap, and the secret scan reads every
 * file it lets through — a file too large to read is kept out of the commit instead.
 */

const defaults = { ...DIFF_LIMITS };
afterEach(() => Object.assign(DIFF_LIMITS, defaults));

/** A shell command that writes `bytes` of ordinary text lines to `file`. */
const bigFile = (file: string, bytes: number) => `mkdir -p "$(dirname ${file})" && yes 'a line of generated build output 0123456789' | head -c ${bytes} > ${file}`;

const h = useWorkflowHarness();

describe("hardening #29.5 huge command output", () => {
  const live: RunSandbox[] = [];
  afterAll(async () => {
    for (const s of live) await s.destroy().catch(() => {});
  });
  async function sandboxWith(runId: string, command: string) {
    const repo = await makeGitRepo();
    const s = await createSandbox({ runId, repoPath: repo, ref: "main", branch: `autonomous/${runId}`, kind: "local" });
    live.push(s);
    const r = await s.exec("sh", ["-c", command], { timeoutMs: 60_000 });
    expect(r.exitCode).toBe(0);
    return s;
  }

  it("hardening #29.5 the validation diff leaves a command's 20 MB file out with a note and stays bounded; the file still counts as changed", async () => {
    const s = await sandboxWith("run_huge01", `${bigFile("out/big.txt", 20_000_000)} && echo small > out/small.txt`);
    const seen: LanguageModelV3CallOptions[] = [];
    const model = createScriptedModel({
      respond: (o) => {
        seen.push(o);
        return { text: JSON.stringify({ passed: true, alignmentScore: 9, findings: [], feedback: "", rationale: "scripted" }) };
      },
    });
    const plan = planOf({ tasks: [{ id: "T1", files: ["out/"] }], criteria: [{ id: "AC1", description: "small exists", command: "test -f out/small.txt" }] });
    const r = await runValidator({ plan, request: "Build", sandbox: s, modelId: "demo:scripted", model, context: {} });
    expect(r.changedFiles).toEqual(["out/big.txt", "out/small.txt"]);
    const prompt = instructionText(seen[0]!.prompt);
    expect(prompt).toContain("[out/big.txt: 19.1 MB, left out of the diff]");
    expect(prompt).toContain("+small");
    expect(prompt).not.toContain("a line of generated build output");
    expect(prompt.length).toBeLessThan(100_000);
  }, 120_000);

  it("hardening #29.5 a sandbox's diff is cut at its byte cap (git is stopped) and says so", async () => {
    const s = await sandboxWith("run_huge02", "mkdir -p many && for i in $(seq 1 40); do yes \"file $i line\" | head -c 200000 > many/f$i.txt; done");
    const diff = await s.diff({ maxBytes: 300_000 });
    expect(Buffer.byteLength(diff)).toBeLessThan(301_000);
    expect(diff).toMatch(/\[the diff was cut at 293(\.\d)? KB: the files after this point are left out\]\n$/);
    // Every file is under the size limit, so none is named as left out for its size.
    expect(diff).not.toContain("left out of the diff");
  }, 120_000);

  it("hardening #29.5 the secret scan reads files over the diff's size limit (a key in a long line too) and keeps out one too large to read", async () => {
    DIFF_LIMITS.scanFileBytes = 5_000_000;
    const key = FAKE.anthropic;
    const s = await sandboxWith(
      "run_huge03",
      [
        // 3 MB with a key in the middle: over the diff's 1 MB limit, under the scan's.
        `${bigFile("a/middle.txt", 1_500_000)} && echo 'token: ${key}' >> a/middle.txt && ${bigFile("a/tail.txt", 1_500_000)} && cat a/tail.txt >> a/middle.txt && rm a/tail.txt`,
        // One 2 MB line holding a key far from its start (read in pieces).
        `head -c 2000000 /dev/zero | tr '\\0' x > a/oneline.txt && printf ' ${key} ' >> a/oneline.txt && head -c 1000 /dev/zero | tr '\\0' y >> a/oneline.txt`,
        // 8 MB of harmless text: too large to read, so it is not committed either.
        bigFile("a/huge.txt", 8_000_000),
        "echo fine > a/clean.txt",
      ].join(" && "),
    );
    const scan = await scanChangesForSecrets(s);
    expect(scan.files.sort()).toEqual(["a/middle.txt", "a/oneline.txt"]);
    expect(scan.unchecked).toEqual([{ path: "a/huge.txt", why: "7.6 MB: too large to check for secrets (the limit is 4.8 MB)" }]);
  }, 120_000);

  it("hardening #29.5 past the scan's total cap every file not read to its end is kept out", async () => {
    DIFF_LIMITS.scanTotalBytes = 500_000;
    const s = await sandboxWith("run_huge04", "mkdir -p m && for i in 1 2 3 4 5 6; do yes \"file $i\" | head -c 200000 > m/f$i.txt; done");
    const scan = await scanChangesForSecrets(s);
    expect(scan.files).toEqual([]);
    const unchecked = scan.unchecked.map((u) => u.path);
    expect(unchecked).toEqual(["m/f3.txt", "m/f4.txt", "m/f5.txt", "m/f6.txt"]);
    expect(scan.unchecked[0]!.why).toBe("the changes are over 488.3 KB in all: too large to check for secrets");
  }, 120_000);

  it("hardening #29.5 GET /api/runs/:id/diff leaves a command's 20 MB file out with a note and a bounded body", async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Build\n[scope: out/]\n[run: ${bigFile("out/big.txt", 20_000_000)}]`, { trustMode: { planning: "auto" } });
    const done = await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "paused"], 180_000);
    expect(done.status).toBe("completed");
    await waitForWorkflow(run.id);
    const res = await call(diffRoute.GET, { headers: ADMIN, params: { id: run.id } });
    expect(res.status).toBe(200);
    expect(res.json.notes).toEqual(["out/big.txt: 19.1 MB, left out of the diff"]);
    expect(res.json.truncated).toBe(false);
    expect(res.json.diff).toContain("diff --git a/out/big.txt b/out/big.txt");
    expect(res.json.diff).toContain("+++ b/docs/requests/");
    expect(res.json.diff.length).toBeLessThan(50_000);
  }, 240_000);

  it("hardening #29.5 a run whose command writes a file too large to scan pauses instead of committing it", async () => {
    DIFF_LIMITS.scanFileBytes = 2_000_000;
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, `Build\n[scope: out/]\n[run: ${bigFile("out/big.txt", 3_000_000)}]`, { trustMode: { planning: "auto" } });
    const paused = await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "paused"], 180_000);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "secret_detected" });
    expect(paused.pauseReason!.message).toContain("out/big.txt (2.9 MB: too large to check for secrets (the limit is 1.9 MB))");
    expect(git(repo, "log", "--format=%H", "--all", "--", "out/big.txt")).toBe("");
  }, 240_000);
});
