import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { newProject } from "../workflow/harness";
import { startApiServer } from "../cli/server";
import { fakeContext, recorded, script, vscode } from "./fake-vscode";

/*
 * The extension's host code run for real (src/host/extension.ts: activate, its commands and its status bar) against the
 * app's route handlers and embedded executor, with a scripted stand-in for the `vscode` module (fake-vscode.ts): the
 * "New run…" and "Explore N approaches…" commands from the palette and from a project in the tree, and the status bar
 * count of the decisions that wait for you. Run by vitest (`npx vitest run tests/vscode/host.test.ts`), in CI with the
 * rest of tests/.
 */

vi.mock("vscode", () => ({ ...vscode, default: vscode }));

let server: Awaited<ReturnType<typeof startApiServer>>;
let project: { id: string; name: string };
let context: ReturnType<typeof fakeContext>;
const token = process.env.GATEHOUSE_ADMIN_TOKEN!;

async function api<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } });
  return (await response.json()) as T;
}

const status = () => recorded.statusItems.find((i) => i.id === "gatehouse.waiting")!;

beforeAll(async () => {
  server = await startApiServer();
  ({ project } = await newProject(server.user));
  vscode.workspace.config.serverUrl = server.url;
  context = fakeContext(token);
  const { activate } = await import("@/extensions/vscode/src/host/extension");
  await activate(context as never);
}, 120_000);
afterAll(async () => {
  for (const d of context?.subscriptions ?? []) d.dispose();
  await server?.close();
});

describe("VS Code: starting runs from the editor", () => {
  it("every command activate registers is declared in package.json; New run… and Explore… are on a project in the tree and in the palette", async () => {
    const manifest = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, "../../extensions/vscode/package.json"), "utf8"));
    const declared = new Set(manifest.contributes.commands.map((c: { command: string }) => c.command));
    expect([...recorded.commands.keys()].filter((id) => !declared.has(id))).toEqual([]);
    const onProject = manifest.contributes.menus["view/item/context"].filter((m: { when: string }) => m.when.includes("viewItem == project")).map((m: { command: string }) => m.command);
    expect(new Set(onProject)).toEqual(new Set(["gatehouse.newRun", "gatehouse.exploreApproaches"]));
    const hidden = manifest.contributes.menus.commandPalette.filter((m: { when: string }) => m.when === "false").map((m: { command: string }) => m.command);
    expect(hidden).not.toContain("gatehouse.newRun");
    expect(hidden).not.toContain("gatehouse.exploreApproaches");
  });

  it("New run… from the palette: picks the project, takes the request, starts the run and opens its panel", async () => {
    expect(recorded.commands.has("gatehouse.newRun")).toBe(true);
    script.picks.push((items) => items.find((i) => (i.project as { id: string }).id === project.id));
    script.inputs.push("Write a note from the palette");
    await vscode.commands.executeCommand("gatehouse.newRun");
    expect(recorded.errors).toEqual([]);
    expect(recorded.quickPickTitles.at(-1)).toBe("New run in which project?");
    const { runs } = await api<{ runs: Array<{ id: string; originalRequest: string }> }>(`/api/runs?projectId=${project.id}`);
    const run = runs.find((r) => r.originalRequest === "Write a note from the palette");
    expect(run).toBeDefined();
    expect(recorded.info.at(-1)).toBe(`Gatehouse: started run ${run!.id}.`);
    expect(recorded.panels.at(-1)).toBe(`Run ${run!.id}`);
  });

  it("Explore N approaches… on a project in the tree: no project pick, N runs in one group; a bad count starts nothing", async () => {
    const node = { kind: "project", id: project.id, label: project.name, description: "", runCount: 0 };
    const before = (await api<{ runs: unknown[] }>(`/api/runs?projectId=${project.id}`)).runs.length;
    const picksBefore = recorded.quickPickTitles.length;
    script.inputs.push("Name the helper", "9");
    await vscode.commands.executeCommand("gatehouse.exploreApproaches", node);
    expect(recorded.invalid.at(-1)).toBe("Give a whole number from 2 to 5.");
    expect((await api<{ runs: unknown[] }>(`/api/runs?projectId=${project.id}`)).runs.length).toBe(before);

    script.inputs.push("Name the helper", "3");
    await vscode.commands.executeCommand("gatehouse.exploreApproaches", node);
    expect(recorded.quickPickTitles.length).toBe(picksBefore);
    const { runs } = await api<{ runs: Array<{ originalRequest: string; groupId?: string | null }> }>(`/api/runs?projectId=${project.id}`);
    const approaches = runs.filter((r) => r.originalRequest.startsWith("Name the helper"));
    expect(approaches.map((r) => r.originalRequest).sort()).toEqual(["Name the helper\n\nApproach 1 of 3", "Name the helper\n\nApproach 2 of 3", "Name the helper\n\nApproach 3 of 3"]);
    expect(recorded.info.at(-1)).toMatch(/^Gatehouse: started 3 approaches of /);
  });

  it("New run… on a project in the tree: no project pick, the run starts in that project", async () => {
    const node = { kind: "project", id: project.id, label: project.name, description: "", runCount: 0 };
    const picksBefore = recorded.quickPickTitles.length;
    script.inputs.push("Write a note from the tree");
    await vscode.commands.executeCommand("gatehouse.newRun", node);
    expect(recorded.errors).toEqual([]);
    expect(recorded.quickPickTitles.length).toBe(picksBefore);
    const { runs } = await api<{ runs: Array<{ id: string; originalRequest: string }> }>(`/api/runs?projectId=${project.id}`);
    const run = runs.find((r) => r.originalRequest === "Write a note from the tree");
    expect(run).toBeDefined();
    expect(recorded.info.at(-1)).toBe(`Gatehouse: started run ${run!.id}.`);
  });

  it("Explore N approaches… from the palette: picks the project, then starts N runs in one group", async () => {
    script.picks.push((items) => items.find((i) => (i.project as { id: string }).id === project.id));
    script.inputs.push("Rename the module", "2");
    await vscode.commands.executeCommand("gatehouse.exploreApproaches");
    expect(recorded.errors).toEqual([]);
    expect(recorded.quickPickTitles.at(-1)).toBe("Explore approaches in which project?");
    const { runs } = await api<{ runs: Array<{ originalRequest: string; groupId?: string | null }> }>(`/api/runs?projectId=${project.id}`);
    const approaches = runs.filter((r) => r.originalRequest.startsWith("Rename the module"));
    expect(approaches.map((r) => r.originalRequest).sort()).toEqual(["Rename the module\n\nApproach 1 of 2", "Rename the module\n\nApproach 2 of 2"]);
    expect(new Set(approaches.map((r) => r.groupId)).size).toBe(1);
    expect(recorded.info.at(-1)).toMatch(/^Gatehouse: started 2 approaches of /);
  });

  it("the status bar counts the decisions that wait for you, and follows the count on refresh", async () => {
    const waitingNow = async () => (await api<{ open: number }>("/api/inbox?filter=open&limit=1")).open;
    // The runs the tests above started settle first (at a gate or done), so the count holds still while it is read.
    const settled = async () => (await api<{ runs: Array<{ status: string }> }>(`/api/runs?projectId=${project.id}`)).runs.every((r) => !["queued", "running"].includes(r.status));
    await vi.waitFor(async () => expect(await settled()).toBe(true), { timeout: 180_000, interval: 200 });
    await vscode.commands.executeCommand("gatehouse.refresh");
    await vi.waitFor(async () => expect(status().text).toBe((await waitingNow()) ? `$(bell-dot) ${await waitingNow()}` : "$(bell) 0"), { timeout: 10_000 });
    expect(status()).toMatchObject({ visible: true, command: "gatehouse.openRun" });

    // A run that stops at its plan gate is one more decision waiting.
    const before = await waitingNow();
    await api("/api/runs", { method: "POST", body: JSON.stringify({ projectId: project.id, request: "Wait for me", config: { trustMode: { planning: "manual" } } }) });
    await vi.waitFor(async () => expect(await waitingNow()).toBe(before + 1), { timeout: 180_000, interval: 200 });
    await vscode.commands.executeCommand("gatehouse.refresh");
    await vi.waitFor(() => expect(status().text).toBe(`$(bell-dot) ${before + 1}`), { timeout: 10_000 });
    expect(status().tooltip).toMatch(/decisions? waits? for you/);
  }, 240_000);
});
