import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { GitHubAuthError, githubClock, installationToken, tokenStats } from "@/lib/github/app";
import { cachePath, pushBranch, repositoryInfo, syncRepository } from "@/lib/github/git";
import type { GitHubEmulator } from "./emulator";
import { configureGitHub } from "./setup-github";

/*
 * The GitHub App client against the emulator: real HTTP through Octokit, app JWTs verified with the app's public key,
 * installation tokens narrowed to the repository, refreshed when they expire or are refused, 5xx retried (bounded),
 * and a 401 that survives a fresh token reported as GitHubAuthError.
 */

let gh: GitHubEmulator;
const ref = { owner: "acme", repo: "tools" };

beforeAll(async () => {
  ({ emulator: gh } = await configureGitHub());
  gh.addRepository({ owner: "acme", name: "tools" });
  gh.addRepository({ owner: "acme", name: "other" });
});
afterAll(async () => {
  githubClock.now = () => Date.now();
  await gh.close();
});

const count = (key: string) => gh.requests.filter((r) => r === key).length;

describe("installation tokens", () => {
  it("are minted with the app JWT, narrowed to the one repository and delivery's permissions, and cached", async () => {
    const before = tokenStats.minted;
    const info = await repositoryInfo(ref);
    expect(info).toMatchObject({ defaultBranch: "main", cloneUrl: `${gh.url}/git/acme/tools.git` });
    await repositoryInfo(ref);
    expect(tokenStats.minted - before).toBe(1);
    expect(count("GET /repos/acme/tools/installation")).toBe(1);
    const token = gh.issued.at(-1)!;
    expect(gh.tokenInfo(token)).toMatchObject({ repositories: ["acme/tools"], permissions: { contents: "write", pull_requests: "write" } });
    // The token cannot reach another repository of the same installation.
    const other = await fetch(`${gh.url}/repos/acme/other`, { headers: { authorization: `token ${token}` } });
    expect(other.status).toBe(404);
  });

  it("are refreshed shortly before they expire (and the expired one no longer works at GitHub)", async () => {
    const old = await installationToken(ref);
    const minted = tokenStats.minted;
    const later = Date.now() + 56 * 60_000; // the emulator's tokens last 60 minutes; refreshed 5 minutes before
    githubClock.now = () => later;
    try {
      await repositoryInfo(ref);
      expect(tokenStats.minted).toBe(minted + 1);
      const fresh = await installationToken(ref);
      expect(fresh).not.toBe(old);
      // At GitHub's clock the old one is still valid for 4 more minutes; at 61 minutes it is refused.
      gh.state.now = () => Date.now() + 61 * 60_000;
      const refused = await fetch(`${gh.url}/repos/acme/tools`, { headers: { authorization: `token ${old}` } });
      expect(refused.status).toBe(401);
    } finally {
      githubClock.now = () => Date.now();
      gh.state.now = () => Date.now();
    }
  });

  it("a token GitHub refuses early (401) is replaced once and the request succeeds", async () => {
    await repositoryInfo(ref);
    const minted = tokenStats.minted;
    gh.revokeTokens();
    await expect(repositoryInfo(ref)).resolves.toMatchObject({ defaultBranch: "main" });
    expect(tokenStats.minted).toBe(minted + 1);
  });

  it("a 401 that a fresh token does not cure is a GitHubAuthError with a clear message", async () => {
    gh.revokeTokens();
    gh.state.rejectAppJwt = true;
    try {
      const error = await repositoryInfo(ref).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(GitHubAuthError);
      expect((error as Error).message).toMatch(/GitHub refused the app's credentials .*401/);
    } finally {
      gh.state.rejectAppJwt = false;
    }
  });
});

describe("server errors", () => {
  it("5xx answers are retried, for repository and app endpoints alike", async () => {
    await repositoryInfo(ref);
    const before = count("GET /repos/acme/tools");
    gh.fail(/^GET \/repos\/acme\/tools$/, 2, 502);
    await expect(repositoryInfo(ref)).resolves.toMatchObject({ defaultBranch: "main" });
    expect(count("GET /repos/acme/tools") - before).toBe(3);

    gh.revokeTokens();
    gh.fail(/^POST \/app\/installations\/\d+\/access_tokens$/, 1, 503);
    await expect(repositoryInfo(ref)).resolves.toMatchObject({ defaultBranch: "main" });
  });

  it("the retries are bounded: a server that keeps failing fails the call", async () => {
    const before = count("GET /repos/acme/tools");
    gh.fail(/^GET \/repos\/acme\/tools$/, 4, 500);
    const error = await repositoryInfo(ref).catch((e: unknown) => e);
    expect((error as { status?: number }).status).toBe(500);
    // One request and three retries, then the caller (a durable step, retried by the executor) sees the failure.
    expect(count("GET /repos/acme/tools") - before).toBe(4);
  });
});

describe("git over HTTPS", () => {
  it("fetches into the cache clone and pushes with the token only in the git process's environment; an expired token is replaced", async () => {
    const { repoPath, baseSha } = await syncRepository({ ref, baseBranch: "main" });
    expect(repoPath).toBe(cachePath(ref));
    expect(baseSha).toBe(gh.git("acme", "tools", "rev-parse", "main"));
    execFileSync("git", ["update-ref", "refs/heads/autonomous/test-push", baseSha], { cwd: repoPath });

    gh.revokeTokens();
    const pushed = await pushBranch({ ref, branch: "autonomous/test-push" });
    expect(gh.git("acme", "tools", "rev-parse", "refs/heads/autonomous/test-push")).toBe(pushed.sha);

    const config = fs.readFileSync(path.join(repoPath, "config"), "utf8");
    expect(config).not.toMatch(/x-access-token|extraheader|ghs_/i);
    for (const token of gh.issued) {
      expect(config.includes(token)).toBe(false);
      expect(fs.readdirSync(repoPath).some((f) => f.includes(token))).toBe(false);
    }
  });
});
