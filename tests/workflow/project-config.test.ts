import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { git, launch, makeRepo, newProject, useWorkflowHarness, waitForPendingGate, waitForStatus, waitForWorkflow } from "./harness";
import { decideFix } from "@/lib/runs/gates/decide-gate";
import { gateDecided } from "@/inngest/events";
import { startRun } from "@/lib/runs/service";
import { createProject } from "@/lib/projects/queries";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";
import { listEvents } from "@/lib/db/event-store";
import { readProjectConfig } from "@/lib/git/memory";
import { getEnv } from "@/lib/env";
import designConfig from "./fixtures/design-config.json";

/** `.autonomous/config.json` in the repository: its defaults apply under the project's and the request's config. */

const h = useWorkflowHarness();

function withConfigFile(repo: string, config: unknown) {
  fs.mkdirSync(path.join(repo, ".autonomous"), { recursive: true });
  fs.writeFileSync(path.join(repo, ".autonomous", "config.json"), JSON.stringify(config));
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "config");
}

describe("repository config (.autonomous/config.json)", () => {
  it("its defaults apply: request config over project config over the repository file", async () => {
    const { project, repo } = await newProject(h.user);
    withConfigFile(repo, { trustMode: { planning: "auto", fixes: "manual" }, maxClarifications: 7, limits: { maxFixAttempts: 1 } });
    const plain = await startRun({ user: h.user, projectId: project.id, request: "x" });
    expect(plain.config).toMatchObject({ trustMode: { planning: "auto", fixes: "manual" }, maxClarifications: 7, limits: { maxFixAttempts: 1 } });

    const other = makeRepo();
    withConfigFile(other, { trustMode: { planning: "auto", fixes: "manual" }, maxClarifications: 7 });
    const layered = await createProject({ name: "layered", ownerId: h.user.id, repository: { type: "local", path: other }, defaultConfig: { maxClarifications: 2 } });
    const run = await startRun({ user: h.user, projectId: layered.id, request: "x", config: { trustMode: { fixes: "auto" } } });
    expect(run.config.trustMode).toMatchObject({ planning: "auto", fixes: "auto" });
    expect(run.config.maxClarifications).toBe(2);
  });

  it("excludePaths never reach the branch: not in the work-in-progress commit of a wait, nor after the restore", async () => {
    const { project, repo } = await newProject(h.user);
    withConfigFile(repo, { excludePaths: ["secrets", "*.log"] });
    const run = await launch(
      h.user,
      project.id,
      "Exclude some paths\n[run: mkdir -p secrets && echo key > secrets/key.txt && echo noise > build.log && echo ok > kept.txt]\n[scope: kept.txt]\n[fail-validation: 1]",
      { trustMode: { planning: "auto", fixes: "manual" }, modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "demo:default" } },
    );
    await waitForStatus(run.id, ["awaiting_fix_decision"], 120_000);
    const committed = () => git(repo, "log", "--name-only", "--format=", run.branch!).split("\n").filter(Boolean);
    // Waiting for the fix decision, the run holds no sandbox: its work in progress was committed, without the excluded.
    expect(git(repo, "log", "--format=%s", run.branch!)).toMatch(/WIP before pause/);
    expect(committed()).toContain("kept.txt");
    expect(committed().filter((f) => f.startsWith("secrets/") || f.endsWith(".log"))).toEqual([]);

    const gate = await waitForPendingGate(run.id);
    await decideFix({ user: h.user, runId: run.id, input: { gateId: gate.id, decision: "retry" } });
    await announceDecision({ event: gateDecided.create({ runId: run.id, gateId: gate.id, decision: "retry" }), key: decisionKey.gate(gate.id) });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    expect(committed().filter((f) => f.startsWith("secrets/") || f.endsWith(".log"))).toEqual([]);
    expect(git(repo, "show", `${run.branch}:kept.txt`)).toBe("ok");
  });

  it("the seed design's own example is accepted verbatim: defaultRunConfig applies, requireApprovalFor gates, bare model names resolve", async () => {
    const { project, repo } = await newProject(h.user);
    withConfigFile(repo, designConfig);
    const file = await readProjectConfig({ repoPath: repo, ref: "main" });
    expect(file.excludePaths).toEqual(["node_modules/", ".env", "*.log"]);
    expect(file.defaults).toMatchObject({ maxClarifications: 3, git: { autoMerge: false, requireApprovalFor: ["planning", "implementation"] } });

    const run = await startRun({ user: h.user, projectId: project.id, request: "x" });
    // defaultRunConfig's trustMode, with "implementation" turned manual by git.requireApprovalFor.
    expect(run.config.trustMode).toEqual({ planning: "manual", implementation: "manual", fixes: "manual" });
    expect(run.config.maxClarifications).toBe(3);
    expect(run.config.git).toMatchObject({ autoMerge: false, requireApprovalFor: ["planning", "implementation"] });
    // No provider keys in the test environment: each bare name resolved to its provider, then fell back, with a note.
    const env = getEnv();
    expect(env.DEEPSEEK_API_KEY && env.ANTHROPIC_API_KEY && env.OPENAI_API_KEY).toBeFalsy();
    expect(run.config.modelRouting).toEqual({ planner: "demo:default", implementer: "demo:default", validator: "demo:default" });
    const created = (await listEvents({ runId: run.id })).find((e) => e.type === "RUN_CREATED")!;
    const notes = (created.payload as { notes?: string[] }).notes ?? [];
    expect(notes.join("\n")).toMatch(/deepseek:deepseek-reasoner/);
    expect(notes.join("\n")).toMatch(/anthropic:claude-3-5-sonnet-20241022/);
    expect(notes.join("\n")).toMatch(/openai:gpt-4o-mini/);

    // A run's own routing naming a provider without its key stays a 400.
    await expect(startRun({ user: h.user, projectId: project.id, request: "x", config: { modelRouting: { planner: "deepseek-reasoner" } } })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/modelRouting\.planner: "deepseek:deepseek-reasoner" uses .* set DEEPSEEK_API_KEY/),
    });

    // The flat shape of the same file is accepted too.
    const flat = await newProject(h.user);
    withConfigFile(flat.repo, { ...designConfig.defaultRunConfig, git: designConfig.git, excludePaths: designConfig.excludePaths });
    const flatRun = await startRun({ user: h.user, projectId: flat.project.id, request: "x" });
    expect(flatRun.config.trustMode).toEqual({ planning: "manual", implementation: "manual", fixes: "manual" });
  });

  it("git.requireApprovalFor [\"implementation\"] opens the implementation gate though trustMode.implementation is auto", async () => {
    const { project, repo } = await newProject(h.user);
    withConfigFile(repo, { defaultRunConfig: { trustMode: { planning: "auto", implementation: "auto" } }, git: { requireApprovalFor: ["implementation"] } });
    const run = await launch(h.user, project.id, "Write a file\n[run: echo ok > kept.txt]", {
      modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "demo:default" },
    });
    expect(run.config.trustMode).toMatchObject({ planning: "auto", implementation: "manual" });
    const gate = await waitForPendingGate(run.id, 120_000);
    expect(gate.kind).toBe("implementation");
    expect((await waitForStatus(run.id, ["awaiting_approval"], 30_000)).status).toBe("awaiting_approval");
  }, 200_000);

  it("the design's excludePaths (node_modules/, .env, *.log) never reach the branch, at any depth, whoever writes them", async () => {
    const { project, repo } = await newProject(h.user);
    withConfigFile(repo, { excludePaths: designConfig.excludePaths });
    const run = await launch(
      h.user,
      project.id,
      "Write some build output\n[run: mkdir -p node_modules/a sub/node_modules && echo x > node_modules/a/f.js && echo y > sub/node_modules/g.js && echo S=1 > .env && echo noise > build.log && echo ok > kept.txt]\n[scope: kept.txt]",
      { trustMode: { planning: "auto", implementation: "auto", fixes: "auto" }, modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "demo:default" } },
    );
    // Wherever the run comes to rest (the demo validator may ask for a fix decision), its implementation is committed.
    await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 150_000);
    const committed = git(repo, "log", "--name-only", "--format=", run.branch!).split("\n").filter(Boolean);
    expect(committed).toContain("kept.txt");
    expect(committed.filter((f) => f.includes("node_modules/") || f === ".env" || f.endsWith(".log"))).toEqual([]);
  }, 200_000);

  it("a malformed file is a 400 that names the file", async () => {
    const { project, repo } = await newProject(h.user);
    withConfigFile(repo, { excludePaths: "not-a-list" });
    await expect(startRun({ user: h.user, projectId: project.id, request: "x" })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/\.autonomous\/config\.json/),
    });
    // A typo inside the design's defaultRunConfig wrapper is refused, not silently ignored.
    const typo = await newProject(h.user);
    withConfigFile(typo.repo, { defaultRunConfig: { trustmode: { planning: "auto" } } });
    await expect(startRun({ user: h.user, projectId: typo.project.id, request: "x" })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/defaultRunConfig\.trustmode: is not a run config key/),
    });
  });

  it("sandbox.allowInternet opens the sandbox's network; without it there is none", async () => {
    let connections = 0;
    const server = net.createServer((s) => {
      connections++;
      s.end("hello\n");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    const probe = `[run: mkdir -p out; node -e "const s=require('net').connect(${port},'127.0.0.1');s.on('data',d=>{console.log('GOT',String(d).trim());s.end()});s.on('error',e=>console.log('ERR',e.code))" > out/net.txt 2>&1]`;
    const config = { trustMode: { planning: "auto", fixes: "manual" }, modelRouting: { planner: "demo:default", implementer: "demo:default", validator: "demo:default" } };
    try {
      const closed = await newProject(h.user);
      const a = await launch(h.user, closed.project.id, `No network\n${probe}\n[scope: out/]`, config);
      await waitForStatus(a.id, ["completed", "awaiting_fix_decision"]);
      expect(git(closed.repo, "show", `${a.branch}:out/net.txt`)).toMatch(/ERR/);
      expect(connections).toBe(0);

      const open = await newProject(h.user);
      withConfigFile(open.repo, { sandbox: { allowInternet: true } });
      const b = await launch(h.user, open.project.id, `Network allowed\n${probe}\n[scope: out/]`, config);
      await waitForStatus(b.id, ["completed", "awaiting_fix_decision"]);
      expect(git(open.repo, "show", `${b.branch}:out/net.txt`)).toContain("GOT hello");
      expect(connections).toBe(1);
    } finally {
      server.close();
    }
  });
});
