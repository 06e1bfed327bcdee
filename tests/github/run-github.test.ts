import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { projects, workflowRuns } from "@/lib/db/schema";
import { createProject } from "@/lib/projects/queries";
import { getRunState, listEvents } from "@/lib/db/event-store";
import { validateMermaid } from "@/lib/mermaid";
import { cachePath } from "@/lib/github/git";
import { signPayload } from "@/lib/github/webhooks";
import { pullRequestTitle } from "@/lib/github/pulls";
import type { PlanDocument } from "@/lib/workflow";
import { resumeRun } from "@/lib/runs/gates/decide-run";
import { inngest } from "@/inngest";
import { runResumed } from "@/inngest/events";
import { POST as webhook } from "@/app/api/github/webhook/route";
import { expectRunConsistent, fileBlock, launch, startWorkflowHarness, until, waitForStatus, waitForWorkflow } from "../workflow/harness";
import type { GitHubEmulator } from "./emulator";
import { configureGitHub, WEBHOOK_SECRET } from "./setup-github";

/*
 * Runs on GitHub projects, end to end: the real workflow on the embedded executor, the demo model, Octokit making real
 * HTTP calls to the emulator, and git pushing over HTTP to its git http-backend remotes.
 */

let gh: GitHubEmulator;
let h: Awaited<ReturnType<typeof startWorkflowHarness>>;
beforeAll(async () => {
  ({ emulator: gh } = await configureGitHub());
  h = await startWorkflowHarness();
});
afterAll(async () => {
  await h.close();
  await gh.close();
});

async function githubProject(name: string) {
  gh.addRepository({ owner: "acme", name });
  return createProject({ name, ownerId: h.user.id, repository: { type: "github", owner: "acme", repo: name } });
}

/** Nothing GitHub issued may appear in the run's events, its commits or the cache clone's config. */
function expectNoTokenLeak(texts: string[]) {
  expect(gh.issued.length).toBeGreaterThan(0);
  for (const token of gh.issued) for (const text of texts) expect(text.includes(token)).toBe(false);
}

describe("a run on a GitHub project", () => {
  it("pushes its branch, opens a draft PR, marks it ready after validation and squash-merges it (autoMerge)", async () => {
    const project = await githubProject("widgets");
    const run = await launch(h.user, project.id, `Add a greeting\n\n${fileBlock("src/greet.txt", "hello")}`, {
      trustMode: { planning: "auto" },
      git: { autoMerge: true },
    });
    const done = await waitForStatus(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");

    const pr = gh.pull("acme/widgets", 1)!;
    expect(pr.head).toBe(run.branch);
    expect(pr.history).toEqual(["opened draft", "updated", "ready", "merged"]);
    expect(pr.body).toContain("```mermaid");
    expect(pr.body).toContain("> Add a greeting");
    // The plan's diagram, coloured at delivery: every task's node is done, and the coloured diagram still parses.
    const diagram = /```mermaid\n([\s\S]*?)\n```/.exec(pr.body)![1]!;
    const plan = (await listEvents({ runId: run.id })).find((e) => e.type === "PLAN_CREATED")!.payload as { plan: PlanDocument };
    expect(diagram.startsWith(plan.plan.mermaid.trim())).toBe(true);
    expect(diagram).toContain("classDef ghDone ");
    expect(/^\s*class (\S+) ghDone$/m.exec(diagram)![1]!.split(",").sort()).toEqual(plan.plan.tasks.map((t) => t.id).sort());
    expect(diagram).not.toMatch(/ghPending|ghRunning/);
    await expect(validateMermaid(diagram)).resolves.toEqual({ kind: "flowchart" });
    expect(pr.body).toMatch(/- \[x\] \*\*\w+\*\*/);
    expect(pr.body).toContain("✅ passed");
    expect(pr.body).toContain("Model usage: $");
    expect(pr.body).toContain(`/runs/${run.id}`);
    expect(done.pullRequest).toMatchObject({ number: 1, draft: false, state: "merged" });
    expect(done.merged).toBe(true);

    // Squash-merged on GitHub: main has the file in one commit on top of the initial one; the branch has the records.
    expect(gh.git("acme", "widgets", "show", "main:src/greet.txt")).toBe("hello");
    expect(gh.git("acme", "widgets", "log", "--format=%s", "main").split("\n")).toHaveLength(2);
    const files = gh.git("acme", "widgets", "ls-tree", "-r", "--name-only", run.branch!).split("\n");
    expect(files).toContain(`.autonomous/runs/${run.id}/context.json`);
    // The records pushed with the delivery say what the run is once delivered, on the branch and on main alike.
    for (const ref of [run.branch!, "main"]) {
      const context = JSON.parse(gh.git("acme", "widgets", "show", `${ref}:.autonomous/runs/${run.id}/context.json`));
      expect(context.status).toBe("completed");
      expect(context.completedAt).toEqual(expect.any(Number));
    }
    expect(gh.git("acme", "widgets", "show", "main:.autonomous/memory.md")).toContain(run.id);

    const events = await expectRunConsistent(run.id);
    const types = events.map((e) => e.type);
    const planned = events.find((e) => e.type === "PLAN_CREATED")!;
    expect(pr.title).toBe(pullRequestTitle({ plan: (planned.payload as { plan: PlanDocument }).plan, request: "" }));
    const opened = events.find((e) => e.type === "PR_OPENED")!;
    expect(opened.payload).toMatchObject({ number: 1, draft: true });
    expect(types.indexOf("BRANCH_PUSHED")).toBeLessThan(types.indexOf("PR_OPENED"));
    expect(types.indexOf("PR_OPENED")).toBeLessThan(types.indexOf("VALIDATION_PASSED"));
    expect(types.indexOf("VALIDATION_PASSED")).toBeLessThan(types.indexOf("PR_UPDATED"));
    expect(types.indexOf("PR_UPDATED")).toBeLessThan(types.indexOf("PR_MERGED"));
    expect(events.find((e) => e.type === "PR_UPDATED")!.payload).toMatchObject({ number: 1, draft: false });

    expectNoTokenLeak([
      JSON.stringify(events),
      gh.git("acme", "widgets", "log", "-p", "--all"),
      fs.readFileSync(`${cachePath({ owner: "acme", repo: "widgets" })}/config`, "utf8"),
    ]);
  });

  it("without autoMerge the PR stays open and ready; a merge by a person arrives by webhook and the run shows merged", async () => {
    const project = await githubProject("gadgets");
    const run = await launch(h.user, project.id, `Fix the docs [fail-validation: 1]\n\n${fileBlock("docs/a.md", "a")}`, {
      trustMode: { planning: "auto" },
    });
    const done = await waitForStatus(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    await waitForWorkflow(run.id);
    const pr = gh.pull("acme/gadgets", 1)!;
    // Draft through the failed validation and the second attempt; ready only after the pass; not merged.
    expect(pr.history).toEqual(["opened draft", "updated", "updated", "ready"]);
    expect(gh.pulls.filter((p) => p.repo === "acme/gadgets")).toHaveLength(1);
    expect(done.pullRequest).toMatchObject({ number: 1, draft: false, state: "open" });
    expect(done.merged).toBe(false);
    expect(gh.git("acme", "gadgets", "log", "--format=%s", "main").split("\n")).toHaveLength(1);

    gh.mergeByHand("acme/gadgets", 1);
    const payload = JSON.stringify({
      action: "closed",
      number: 1,
      pull_request: gh.pullJson(pr),
      repository: gh.repoJson("acme/gadgets"),
      sender: { login: "octocat", id: 1 },
    });
    const response = await webhook(
      new Request("http://127.0.0.1/api/github/webhook", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "pull_request",
          "x-github-delivery": "merge-delivery-1",
          "x-hub-signature-256": signPayload(WEBHOOK_SECRET, payload),
        },
        body: payload,
      }),
      { params: Promise.resolve({}) },
    );
    expect(response.status).toBe(202);
    const merged = await until(async () => {
      const state = await getRunState({ id: run.id });
      return state?.merged ? state : null;
    }, "the run to record the merge");
    expect(merged.pullRequest).toMatchObject({ number: 1, state: "merged" });
    // Project memory (the cached copy of .autonomous/memory.md) is refreshed from the merged base branch.
    const db = await getDb();
    const row = await until(async () => {
      const [p] = await db.select().from(projects).where(eq(projects.id, project.id));
      return p?.memory?.includes(run.id) ? p : null;
    }, "the project memory to be updated");
    expect(row.memory).toContain(run.id);
    await expectRunConsistent(run.id);
  });

  it("changes requested: the follow-up run works on the PR's branch with the inline comments in its request and pushes to the same PR", async () => {
    gh.addRepository({ owner: "acme", name: "reviewed" });
    const project = await createProject({
      name: "reviewed",
      ownerId: h.user.id,
      repository: { type: "github", owner: "acme", repo: "reviewed" },
      // The default limits (parallel tasks): the follow-up plan edits src/badge.txt in two tasks, which therefore run
      // one after the other in plan order, so the review's change (the later task) is what lands.
      defaultConfig: { github: { followUpOnReview: true } },
    });
    const original = await launch(h.user, project.id, `Add a badge\n\n${fileBlock("src/badge.txt", "red")}`, { trustMode: { planning: "auto" } });
    expect((await waitForStatus(original.id, ["completed", "failed", "paused"])).status).toBe("completed");
    await waitForWorkflow(original.id);
    const delivered = gh.git("acme", "reviewed", "rev-parse", `refs/heads/${original.branch}`);

    gh.addReview("acme/reviewed", 1, {
      id: 77,
      user: "reviewer",
      state: "CHANGES_REQUESTED",
      body: `Use the design token for the badge colour.\n\n${fileBlock("src/badge.txt", "var(--accent)")}`,
      comments: [
        { path: "src/badge.txt", line: 1, body: "Not a raw colour:\nuse var(--accent)." },
        { path: "README.md", line: null, body: "Mention the badge." },
      ],
    });
    const payload = JSON.stringify({
      action: "submitted",
      review: { id: 77, state: "changes_requested", body: "Use the design token for the badge colour.\n\n" + fileBlock("src/badge.txt", "var(--accent)"), user: { login: "reviewer", id: 505 } },
      pull_request: gh.pullJson(gh.pull("acme/reviewed", 1)!),
      repository: gh.repoJson("acme/reviewed"),
    });
    const response = await webhook(
      new Request("http://127.0.0.1/api/github/webhook", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "pull_request_review",
          "x-github-delivery": "review-delivery-1",
          "x-hub-signature-256": signPayload(WEBHOOK_SECRET, payload),
        },
        body: payload,
      }),
      { params: Promise.resolve({}) },
    );
    expect(response.status).toBe(202);
    const db = await getDb();
    const followUpRow = await until(async () => {
      const rows = await db.select().from(workflowRuns).where(eq(workflowRuns.projectId, project.id));
      return rows.find((r) => r.id !== original.id) ?? null;
    }, "the follow-up run to start");
    // The inline comments were fetched with the App's token and are in the request, file and line with each.
    expect(gh.requests).toContain("GET /repos/acme/reviewed/pulls/1/reviews/77/comments");
    expect(followUpRow.originalRequest).toContain("Inline comments (file:line — comment):");
    expect(followUpRow.originalRequest).toContain("- src/badge.txt:1 — Not a raw colour: use var(--accent).");
    expect(followUpRow.originalRequest).toContain("- README.md — Mention the badge.");
    expect(followUpRow.branch).toBe(original.branch);

    const done = await waitForStatus(followUpRow.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    await waitForWorkflow(followUpRow.id);
    // The same pull request, refreshed: no second one, and no branch of the follow-up's own on GitHub.
    expect(gh.pulls.filter((p) => p.repo === "acme/reviewed")).toHaveLength(1);
    expect(done.pullRequest).toMatchObject({ number: 1, state: "open" });
    expect(gh.pull("acme/reviewed", 1)!.body).toContain(followUpRow.id);
    expect(gh.git("acme", "reviewed", "for-each-ref", "--format=%(refname)", "refs/heads/").split("\n").sort()).toEqual(
      [`refs/heads/${original.branch}`, "refs/heads/main"].sort(),
    );
    // The PR's branch moved forward from what the first run delivered, and has the reviewer's change.
    expect(gh.git("acme", "reviewed", "show", `${original.branch}:src/badge.txt`)).toBe("var(--accent)");
    gh.git("acme", "reviewed", "merge-base", "--is-ancestor", delivered, `refs/heads/${original.branch}`);
    expect(gh.git("acme", "reviewed", "rev-parse", `refs/heads/${original.branch}`)).not.toBe(delivered);
    // It measured its own work from the branch's tip, not from main.
    const events = await expectRunConsistent(followUpRow.id);
    expect(events.find((e) => e.type === "BRANCH_CREATED")!.payload).toMatchObject({ branch: original.branch, baseSha: delivered });
    expect(events[0]!.payload).toMatchObject({ followUp: { runId: original.id, pullRequest: 1 } });
  });

  it("a 401 GitHub keeps answering pauses the run with a message; fixed and resumed, it completes", async () => {
    const project = await githubProject("locked");
    gh.state.rejectAppJwt = true;
    const run = await launch(h.user, project.id, `Add a file\n\n${fileBlock("x.txt", "x")}`, { trustMode: { planning: "auto" } });
    const paused = await waitForStatus(run.id, ["paused", "completed", "failed"]);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatchObject({ reason: "other" });
    expect(paused.pauseReason!.message).toMatch(/GitHub refused the app's credentials .*acme\/locked.*401/);

    gh.state.rejectAppJwt = false;
    await resumeRun({ user: h.user, runId: run.id, action: "retry" });
    await inngest.send(runResumed.create({ runId: run.id, action: "retry" }));
    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.pullRequest).toMatchObject({ number: 1, draft: false, state: "open" });
    expect(gh.git("acme", "locked", "show", `${run.branch}:x.txt`)).toBe("x");
  });
});
