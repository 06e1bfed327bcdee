import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newProject } from "../workflow/harness";
import { startApiServer } from "../cli/server";
import { GatehouseApi, errorMessage } from "@/extensions/vscode/src/core/api";
import { RunTreeModel, type RunNode } from "@/extensions/vscode/src/core/run-tree";
import { diffDocuments } from "@/extensions/vscode/src/core/diff-documents";
import { createTwoFilesPatch } from "diff";
import type { Run } from "@/cli/types";

let server: Awaited<ReturnType<typeof startApiServer>>;
let api: GatehouseApi;
let project: { id: string; name: string };

beforeAll(async () => {
  server = await startApiServer();
  api = new GatehouseApi({ url: `${server.url}/`, token: process.env.GATEHOUSE_ADMIN_TOKEN! });
  ({ project } = await newProject(server.user));
});
afterAll(async () => {
  await server?.close();
});

/** Resolves once `check` holds after one of the model's change notifications (the model is driven only by SSE here). */
function until(model: RunTreeModel, check: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (check()) return resolve();
    const off = model.onDidChange(() => {
      if (check()) {
        off();
        resolve();
      }
    });
  });
}

async function start(request: string, config: unknown): Promise<Run> {
  return (await api.client.post<{ run: Run }>("/api/runs", { projectId: project.id, request, config })).run;
}

describe("VS Code extension: the run tree against the real API", () => {
  it("lists projects and their runs, follows a run live over SSE to the plan gate, notifies once, and sees approval through to completion", async () => {
    const run = await start("Write a note for the tree", { trustMode: { planning: "manual" } });
    const needs: { id: string; reason: string }[] = [];
    const model = new RunTreeModel({ api: () => api, onNeedsYou: ({ run: r, reason }) => needs.push({ id: r.id, reason }) });
    await model.refresh();

    const [projectNode] = model.children().filter((n) => n.kind === "project" && n.id === project.id);
    expect(projectNode).toMatchObject({ kind: "project", label: project.name, description: expect.stringMatching(/^1 run · \//) });
    const runs = model.children(projectNode) as RunNode[];
    expect(runs.map((n) => n.id)).toEqual([run.id]);
    expect(runs[0]!.label).toBe("Write a note for the tree");

    // No refresh from here on: only the run's event stream moves the model.
    await until(model, () => model.run(run.id)?.status === "awaiting_approval");
    const waiting = (model.children(projectNode) as RunNode[])[0]!;
    expect(waiting).toMatchObject({ status: "awaiting_approval", icon: "bell-dot", contextValue: "run:awaiting_approval" });
    expect(waiting.tooltip).toContain("Needs you: the plan v1 waits for your approval");
    expect(needs).toEqual([{ id: run.id, reason: "the plan v1 waits for your approval" }]);
    expect(model.waiting().map((r) => r.id)).toEqual([run.id]);
    expect(model.followed()).toEqual([run.id]);

    await api.approve({ id: run.id });
    await until(model, () => model.run(run.id)?.status === "completed");
    const done = (model.children(projectNode) as RunNode[])[0]!;
    expect(done).toMatchObject({ status: "completed", icon: "pass", description: "completed" });
    // The stream ended with the run: nothing is followed any more, and the gate was announced only once.
    await until(model, () => model.followed().length === 0);
    expect(needs).toHaveLength(1);
    model.dispose();

    // The branch diff as the diff editor's two sides: the note the run added, with nothing on the left.
    const files = diffDocuments(await api.diff({ id: run.id }));
    expect(files.map((f) => [f.path, f.status])).toEqual([["docs/requests/write-a-note-for-the-tree.md", "added"]]);
    expect(files[0]!.before).toBe("");
    expect(files[0]!.after).toContain("Write a note for the tree");
  });

  it("diff documents: a modified file's two sides hold the hunks' lines, with a marker where a hunk starts further down", () => {
    const before = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";
    const after = before.replace("line 20\n", "line twenty\n");
    const [file] = diffDocuments({ diff: createTwoFilesPatch("a/src/x.ts", "b/src/x.ts", before, after) });
    expect(file).toMatchObject({ path: "src/x.ts", status: "modified" });
    expect(file!.before).toBe("⋯ line 16\nline 16\nline 17\nline 18\nline 19\nline 20\nline 21\nline 22\nline 23\nline 24\n");
    expect(file!.after).toBe("⋯ line 16\nline 16\nline 17\nline 18\nline 19\nline twenty\nline 21\nline 22\nline 23\nline 24\n");
    expect(diffDocuments({ diff: "" })).toEqual([]);
  });

  it("does not notify about runs that were already waiting when the tree first loaded, and reports a refused token in the tree", async () => {
    const run = await start("Another note", { trustMode: { planning: "manual" } });
    const probe = new RunTreeModel({ api: () => api });
    await probe.refresh();
    await until(probe, () => probe.run(run.id)?.status === "awaiting_approval");
    probe.dispose();

    const needs: string[] = [];
    const model = new RunTreeModel({ api: () => api, onNeedsYou: ({ run: r }) => needs.push(r.id) });
    await model.refresh();
    expect(model.run(run.id)?.status).toBe("awaiting_approval");
    expect(needs).toEqual([]);
    model.dispose();
    await api.reject({ id: run.id, feedback: "not needed" }).catch(() => undefined);
    await api.client.post(`/api/runs/${run.id}/cancel`, {});

    const refused = new RunTreeModel({ api: () => new GatehouseApi({ url: server.url, token: "gh_not_a_token" }) });
    await refused.refresh();
    expect(refused.children()).toEqual([{ kind: "message", id: "error", label: expect.stringMatching(/^The server refused the token/) }]);
    const label = refused.children()[0]!.kind === "message" ? (refused.children()[0] as { label: string }).label : "";
    expect(label).not.toContain("gatehouse login");
    expect(label).toMatch(/Create a token in the dashboard and run “Gatehouse: Set API Token”\.$/);

    const unset = new RunTreeModel({ api: () => null });
    await unset.refresh();
    expect(unset.children()).toEqual([{ kind: "message", id: "error", label: expect.stringContaining("gatehouse.serverUrl") }]);
  });

  it("the client's calls map the server's errors to messages that say what went wrong", async () => {
    const missing = await api.run({ id: "run_missing" }).catch((e) => e);
    expect(errorMessage(missing)).toMatch(/^Not found: .*\(\/api\/runs\/run_missing\)\.$/);
    const bad = await api.validateMermaid({ source: "flowchart TD\n  A[x] --> B{{{\n" });
    expect(bad.valid).toBe(false);
  });
});
