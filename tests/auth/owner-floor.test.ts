import { beforeAll, describe, expect, it } from "vitest";
import * as runsRoute from "@/app/api/runs/route";
import { createProject } from "@/lib/projects/queries";
import { setMember } from "@/lib/db/queries/members";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { ADMIN, makeRepo } from "../api/helpers";
import { call, makeUser, type TestUser } from "./fixtures";

/*
 * Issue #29, finding 6: the project owner's default policy (and budgets) are a floor. A run's config — here an
 * approver's — can add to it or narrow it, never drop or widen it.
 */

let approver: TestUser;
let projectId: string;

const OWNER_DEFAULTS = {
  policy: {
    protectedPaths: ["secret/**"],
    commands: { deny: ["curl"], allow: ["npm", "git status"] },
    maxFilesPerRun: 20,
  },
  budgets: { implementation: { costUsd: 5 } },
};

beforeAll(async () => {
  const owner = await ensureLocalOwner();
  const project = await createProject({ name: "floor", ownerId: owner.id, repository: { type: "local", path: makeRepo() }, defaultConfig: OWNER_DEFAULTS });
  projectId = project.id;
  approver = await makeUser("Approver");
  await setMember({ projectId, userId: approver.id, role: "approver" });
});

const start = (headers: Record<string, string>, config: Record<string, unknown>) =>
  call(runsRoute.POST, { method: "POST", path: "/api/runs", headers, body: { projectId, request: "Do it", config } });

describe("hardening #29.6 the owner's policy is a floor", () => {
  it("hardening #29.6 an approver's empty policy keeps the owner's denials and protected paths", async () => {
    const res = await start(approver.headers, { policy: { protectedPaths: [], commands: { deny: [], allow: [] } } });
    expect(res.status).toBe(201);
    const policy = res.json.run.config.policy;
    expect(policy.protectedPaths).toEqual(["secret/**"]);
    expect(policy.commands).toEqual({ deny: ["curl"], allow: ["npm", "git status"] });
    expect(policy.maxFilesPerRun).toBe(20);
  });

  it("hardening #29.6 a run's policy adds to the owner's: its denials and protected paths join them", async () => {
    const res = await start(approver.headers, { policy: { protectedPaths: ["docs/**"], commands: { deny: ["wget"], allow: ["npm test"] }, maxFilesPerRun: 10 } });
    expect(res.status).toBe(201);
    const policy = res.json.run.config.policy;
    expect(policy.protectedPaths).toEqual(["secret/**", "docs/**"]);
    expect(policy.commands).toEqual({ deny: ["curl", "wget"], allow: ["npm test"] });
    expect(policy.maxFilesPerRun).toBe(10);
  });

  it("hardening #29.6 widening the owner's allow list is refused with 403 naming the key; caps and budgets cannot be raised", async () => {
    const widen = await start(approver.headers, { policy: { commands: { allow: ["npm", "curl"] } } });
    expect(widen.status).toBe(403);
    expect(widen.json.error.message).toMatch(/^config\.policy\.commands\.allow: "curl" is not allowed by the project owner's list/);
    // The owner too: loosening is done in the project's default config, not per run.
    expect((await start(ADMIN, { policy: { commands: { allow: ["sh"] } } })).status).toBe(403);

    const raised = await start(approver.headers, { policy: { maxFilesPerRun: 5000 }, budgets: { implementation: { costUsd: 50, tokens: 1000 } } });
    expect(raised.status).toBe(201);
    expect(raised.json.run.config.policy.maxFilesPerRun).toBe(20);
    expect(raised.json.run.config.budgets.implementation).toEqual({ costUsd: 5, tokens: 1000 });
  });
});
