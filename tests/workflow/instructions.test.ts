import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { getRunDetail } from "@/lib/runs/service";
import { git, launch, makeRepo, newProject, waitForStatus, waitForWorkflow } from "./harness";
import { scriptedImplementer, useScriptedWorkflow } from "./model-server";

/**
 * Repository instructions (AGENTS.md at the root and in the folders a task touches, CLAUDE.md,
 * .github/copilot-instructions.md) reach the planner's, implementer's and validator's prompts as the model server sees
 * them: quoted as repository content, the nearest AGENTS.md last (it wins), an oversized file cut with the cut said; and
 * the run records which files it used with their hashes (GET /api/runs/:id `instructions`).
 */

const t = useScriptedWorkflow();
const SCRIPTED = "openai-compatible:scripted";

type Body = { messages?: Array<{ role: string; content?: unknown; tool_calls?: unknown[] }>; tools?: unknown[] };
const text = (body: Body) => (body.messages ?? []).map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? ""))).join("\n");
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

describe("repository instructions", () => {
  it("reach each stage's prompt, nearest AGENTS.md last, an oversized file cut and said, and are recorded with their hashes", { timeout: 180_000 }, async () => {
    const repo = makeRepo();
    const files: Record<string, string> = {
      "AGENTS.md": "# Root\nROOT-RULE: run `npm test` before finishing.\n",
      "pkg/AGENTS.md": "PKG-RULE: the package uses tabs.\n",
      "pkg/sub/AGENTS.md": "SUB-RULE: in this folder, spaces win over the package's tabs.\n",
      "other/AGENTS.md": "OTHER-RULE: not touched by the plan.\n",
      "CLAUDE.md": "CLAUDE-RULE: be brief.\n",
      ".github/copilot-instructions.md": `COPILOT-HEAD\n${"x".repeat(20_000)}\nCOPILOT-TAIL-NEVER-SHOWN\n`,
    };
    for (const [p, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(repo, p)), { recursive: true });
      fs.writeFileSync(path.join(repo, p), content);
    }
    git(repo, "add", ".");
    git(repo, "commit", "-q", "-m", "instructions");
    const { project } = await newProject(t.h.user, repo);

    const prompts: Record<"planner" | "implementer" | "validator", string[]> = { planner: [], implementer: [], validator: [] };
    const implement = scriptedImplementer("pkg/sub/note.md");
    t.model.respond((raw) => {
      const body = raw as Body;
      const all = text(body);
      if (body.tools?.length) {
        prompts.implementer.push(all);
        return implement(raw);
      }
      if (all.includes("You are the planner")) {
        prompts.planner.push(all);
        const plan = {
          kind: "plan",
          clarification: null,
          summary: "Write a note.",
          mermaid: "flowchart TD\n  A[Start] --> B[Note]",
          tasks: [{ id: "T1", title: "Write the note", description: "Write pkg/sub/note.md", dependsOn: [], files: ["pkg/sub/note.md"], checks: [] }],
          acceptanceCriteria: [],
          risks: [],
        };
        return { text: JSON.stringify(plan) };
      }
      if (all.includes("You are the validator")) {
        prompts.validator.push(all);
        return { text: JSON.stringify({ passed: true, findings: [], feedback: "" }) };
      }
      return { text: JSON.stringify({ alignmentScore: 10, rationale: "Scripted." }) };
    });
    const run = await launch(t.h.user, project.id, "Write a note", {
      trustMode: { planning: "auto", fixes: "manual" },
      modelRouting: { planner: SCRIPTED, implementer: SCRIPTED, validator: SCRIPTED },
    });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision"], 120_000)).status).toBe("completed");
    await waitForWorkflow(run.id);

    // Planner: the root's files (no plan yet, so no folder is touched), quoted as repository content; the cut said.
    const planner = prompts.planner[0]!;
    expect(planner).toContain("<repository-instructions>");
    expect(planner).toMatch(/not instructions from Gatehouse/);
    expect(planner).toContain("ROOT-RULE");
    expect(planner).toContain("CLAUDE-RULE");
    expect(planner).toContain("COPILOT-HEAD");
    expect(planner).not.toContain("COPILOT-TAIL-NEVER-SHOWN");
    expect(planner).toMatch(/\.github\/copilot-instructions\.md: the first 12000 of \d+ bytes quoted/);
    expect(planner).not.toContain("SUB-RULE");

    // Implementer: the folders the task touches add theirs, the nearest last (it wins there); an untouched folder's not.
    const impl = prompts.implementer[0]!;
    const [root, pkg, sub] = ["ROOT-RULE", "PKG-RULE", "SUB-RULE"].map((m) => impl.indexOf(m));
    expect(root).toBeGreaterThan(-1);
    expect(pkg).toBeGreaterThan(root!);
    expect(sub).toBeGreaterThan(pkg!);
    expect(impl).toMatch(/pkg\/sub\/AGENTS\.md — applies to files under pkg\/sub\/ \(nearer than the root's, so it wins there\)/);
    expect(impl).not.toContain("OTHER-RULE");
    expect(impl).not.toContain("COPILOT-TAIL-NEVER-SHOWN");

    // Validator: the same files as the implementer's.
    expect(prompts.validator[0]).toContain("SUB-RULE");
    expect(prompts.validator[0]).toContain("ROOT-RULE");

    const detail = await getRunDetail({ user: t.h.user, runId: run.id });
    const recorded = Object.fromEntries(detail.instructions.map((f) => [f.path, f]));
    expect(Object.keys(recorded).sort()).toEqual([".github/copilot-instructions.md", "AGENTS.md", "CLAUDE.md", "pkg/AGENTS.md", "pkg/sub/AGENTS.md"]);
    expect(recorded["AGENTS.md"]).toMatchObject({ bytes: Buffer.byteLength(files["AGENTS.md"]!), sha: sha(files["AGENTS.md"]!), cut: false });
    expect(recorded["AGENTS.md"]!.stages).toEqual(["planning", "implementation", "validation"]);
    expect(recorded["pkg/sub/AGENTS.md"]).toMatchObject({ sha: sha(files["pkg/sub/AGENTS.md"]!), stages: ["implementation", "validation"] });
    expect(recorded[".github/copilot-instructions.md"]).toMatchObject({ cut: true, sha: sha(files[".github/copilot-instructions.md"]!) });
  });
});
