import { afterEach, describe, expect, it } from "vitest";
import { resetEnvCache } from "@/lib/env";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { getRunDetail, startRun } from "@/lib/runs/service";
import { sandboxCapabilities } from "@/lib/sandbox";
import { getHealth } from "@/lib/health";
import type { SessionUser } from "@/lib/auth/guard";
import { makeRepo } from "../workflow/harness";

async function owner(): Promise<SessionUser> {
  const row = await ensureLocalOwner();
  return { id: row.id, name: row.name, via: "admin-token" };
}

afterEach(() => {
  delete process.env.GATEHOUSE_SANDBOX_ISOLATION;
  resetEnvCache();
});

describe("runs without isolation need the project's explicit consent", () => {
  it("with isolation switched off, a run is refused with a message naming the setting; the project's sandbox.allowUnisolated lets it start", async () => {
    process.env.GATEHOUSE_SANDBOX_ISOLATION = "none";
    resetEnvCache();
    const user = await owner();
    const caps = sandboxCapabilities();
    expect(caps.isolated).toBe(false);
    expect(caps.warning).toMatch(/allowUnisolated/);
    expect((await getHealth()).sandbox).toMatchObject({ isolated: false, warning: caps.warning });

    const strict = await createProject({ name: "strict", ownerId: user.id, repository: { type: "local", path: makeRepo() } });
    await expect(startRun({ user, projectId: strict.id, request: "x" })).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/cannot be isolated.*"sandbox": \{"allowUnisolated": true\}/s),
    });

    const lax = await createProject({
      name: "lax",
      ownerId: user.id,
      repository: { type: "local", path: makeRepo() },
      defaultConfig: { sandbox: { allowUnisolated: true } },
    });
    const run = await startRun({ user, projectId: lax.id, request: "x" });
    expect(run.status).toBe("queued");
    // The run page reads this from the run's detail and shows it above the run.
    expect((await getRunDetail({ user, runId: run.id })).sandbox).toEqual({ isolated: false, warning: caps.warning });
  });

  it("a run's own config cannot lower isolation (sandbox is a project-level setting)", async () => {
    const user = await owner();
    const project = await createProject({ name: "p", ownerId: user.id, repository: { type: "local", path: makeRepo() } });
    await expect(startRun({ user, projectId: project.id, request: "x", config: { sandbox: { allowUnisolated: true } } })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/config\.sandbox: can only be set in the project's default config/),
    });
  });

  it("with bubblewrap working, the full sandbox reports no weakness on this machine's kind", () => {
    const caps = sandboxCapabilities();
    expect(caps.isolated).toBe(true);
    expect(caps.bwrap.userNamespace).toBe(true);
    expect(caps.limits.rlimits).toBe(true);
    expect(caps.weaknesses).toEqual(caps.limits.cgroup ? [] : [expect.stringMatching(/no per-command cgroup/)]);
  });
});
