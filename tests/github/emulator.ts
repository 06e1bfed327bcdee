import { execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

/*
 * A GitHub API emulator on 127.0.0.1 for the tests: the endpoints Gatehouse uses, GitHub's response shapes and auth
 * rules (RS256 app JWTs of at most 10 minutes for /app endpoints, installation tokens scoped to repositories and
 * permissions for repository endpoints, 401 "Bad credentials" otherwise), and real git remotes served by
 * `git http-backend` over HTTP with the same installation tokens (Basic x-access-token:<token>).
 */

type Installation = { id: number; account: string };
type Repo = {
  id: number;
  owner: string;
  name: string;
  installationId: number;
  defaultBranch: string;
  gitDir: string;
  /** False once the app is uninstalled from the repository (it still exists on GitHub). */
  installed: boolean;
  /** Collaborators' roles by login: admin | maintain | write | triage | read. */
  collaborators: Map<string, string>;
};
type GitHubUser = { id: number; login: string };
type Token = { token: string; installationId: number; repositories: string[]; permissions: Record<string, string>; expiresAt: number; revoked: boolean };
export type EmulatedPull = {
  number: number;
  nodeId: string;
  repo: string;
  head: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  state: "open" | "closed";
  merged: boolean;
  mergeSha: string | null;
  history: string[];
};

export type EmulatedReview = {
  id: number;
  user: string;
  state: "CHANGES_REQUESTED" | "APPROVED" | "COMMENTED";
  body: string;
  comments: Array<{ path: string; line: number | null; body: string }>;
};

function run(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=Octo", "-c", "user.email=octo@example.com", ...args], { cwd, encoding: "utf8" }).trim();
}

export function generateAppKey() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", {
    modulusLength: 2048,
    privateKeyEncoding: { type: "pkcs1", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  return { privateKey, publicKey };
}

export async function startGitHubEmulator({ appId, publicKey }: { appId: string; publicKey: string }) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-gh-emulator-"));
  const installations = new Map<number, Installation>();
  const repos = new Map<string, Repo>();
  const tokens = new Map<string, Token>();
  const pulls: EmulatedPull[] = [];
  const people = new Map<number, GitHubUser>();
  /** Pull request reviews with their inline comments, by "owner/repo#number". */
  const reviews = new Map<string, EmulatedReview[]>();
  /** Every request, as "METHOD /path" (git requests included). */
  const requests: string[] = [];
  /** Failures to inject: the next `count` requests whose "METHOD /path" matches answer with `status`. */
  const faults: Array<{ match: RegExp; status: number; count: number }> = [];
  /** Tokens ever issued (so tests can prove none leaked). */
  const issued: string[] = [];
  /** `now` is the clock installation tokens expire by (tests move it); app JWTs are always checked against real time. */
  const state = {
    rejectAppJwt: false,
    tokenTtlMs: 60 * 60_000,
    now: () => Date.now(),
    /** Called with every request's "METHOD /path" before it is handled (chaos runs kill the server at a chosen one). */
    onRequest: null as ((key: string) => void | Promise<void>) | null,
  };
  let nextId = 1000;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      handle(req, res, Buffer.concat(chunks)).catch((error) => {
        send(res, 500, { message: String(error) });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

  function send(res: http.ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
    res.end(JSON.stringify(body));
  }
  const badCredentials = (res: http.ServerResponse) => send(res, 401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest", status: "401" });
  const notFound = (res: http.ServerResponse) => send(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest", status: "404" });

  /** An RS256 app JWT signed with the app's key, issued by the app, valid now and for at most 10 minutes. */
  function verifyAppJwt(header: string | undefined): boolean {
    const match = /^Bearer\s+([\w-]+)\.([\w-]+)\.([\w-]+)$/i.exec(header ?? "");
    if (!match || state.rejectAppJwt) return false;
    const [, h, p, s] = match as unknown as [string, string, string, string];
    const head = JSON.parse(Buffer.from(h, "base64url").toString("utf8")) as { alg?: string };
    if (head.alg !== "RS256") return false;
    if (!crypto.verify("RSA-SHA256", Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, "base64url"))) return false;
    const claims = JSON.parse(Buffer.from(p, "base64url").toString("utf8")) as { iss?: unknown; iat?: number; exp?: number };
    const now = Math.floor(Date.now() / 1000);
    if (String(claims.iss) !== appId || typeof claims.iat !== "number" || typeof claims.exp !== "number") return false;
    if (claims.exp - claims.iat > 600 || claims.exp <= now || claims.iat > now + 60) return false;
    return true;
  }

  function installationToken(header: string | undefined): Token | null {
    const match = /^(?:token|Bearer)\s+(ghs_\w+)$/i.exec(header ?? "");
    const basic = /^Basic\s+(\S+)$/i.exec(header ?? "");
    let value = match?.[1];
    if (!value && basic) {
      const [user, pass] = Buffer.from(basic[1]!, "base64").toString("utf8").split(":");
      if (user === "x-access-token") value = pass;
    }
    const token = value ? tokens.get(value) : undefined;
    if (!token || token.revoked || token.expiresAt <= state.now()) return null;
    return token;
  }

  function pullJson(p: EmulatedPull) {
    const repo = repos.get(p.repo)!;
    return {
      url: `${url}/repos/${p.repo}/pulls/${p.number}`,
      id: p.number + 5000,
      node_id: p.nodeId,
      html_url: `${url}/${p.repo}/pull/${p.number}`,
      number: p.number,
      state: p.state,
      locked: false,
      title: p.title,
      body: p.body,
      draft: p.draft,
      merged: p.merged,
      merged_at: p.merged ? new Date().toISOString() : null,
      merge_commit_sha: p.mergeSha,
      user: { login: "gatehouse[bot]", id: 1, type: "Bot" },
      head: { label: `${repo.owner}:${p.head}`, ref: p.head, sha: run(repo.gitDir, "rev-parse", `refs/heads/${p.head}`), repo: { full_name: p.repo } },
      base: { label: `${repo.owner}:${p.base}`, ref: p.base, sha: run(repo.gitDir, "rev-parse", `refs/heads/${p.base}`), repo: { full_name: p.repo } },
    };
  }

  function repoJson(r: Repo) {
    return {
      id: r.id,
      node_id: `R_${r.id}`,
      name: r.name,
      full_name: `${r.owner}/${r.name}`,
      private: true,
      owner: { login: r.owner, id: r.installationId, type: "Organization" },
      html_url: `${url}/${r.owner}/${r.name}`,
      clone_url: `${url}/git/${r.owner}/${r.name}.git`,
      default_branch: r.defaultBranch,
    };
  }

  /** Squash-merge on the bare repository, as GitHub does: one commit on the base with the merged tree. */
  function squash(p: EmulatedPull, title: string): string | null {
    const repo = repos.get(p.repo)!;
    const base = run(repo.gitDir, "rev-parse", `refs/heads/${p.base}`);
    const head = run(repo.gitDir, "rev-parse", `refs/heads/${p.head}`);
    let tree: string;
    try {
      tree = run(repo.gitDir, "merge-tree", "--write-tree", base, head).split("\n")[0]!;
    } catch {
      return null;
    }
    const sha = execFileSync("git", ["commit-tree", tree, "-p", base, "-m", title], {
      cwd: repo.gitDir,
      encoding: "utf8",
      env: { ...process.env, GIT_AUTHOR_NAME: "GitHub", GIT_AUTHOR_EMAIL: "noreply@github.com", GIT_COMMITTER_NAME: "GitHub", GIT_COMMITTER_EMAIL: "noreply@github.com" },
    }).trim();
    run(repo.gitDir, "update-ref", `refs/heads/${p.base}`, sha, base);
    p.merged = true;
    p.state = "closed";
    p.mergeSha = sha;
    p.history.push("merged");
    return sha;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) {
    const u = new URL(req.url ?? "/", url);
    const key = `${req.method} ${u.pathname}`;
    requests.push(key);
    // A test may hold the request here (a promise), e.g. until the server that sent it has been killed.
    await state.onRequest?.(key);
    const fault = faults.find((f) => f.count > 0 && f.match.test(key));
    if (fault) {
      fault.count -= 1;
      return send(res, fault.status, { message: "Server Error" });
    }
    const auth = req.headers.authorization;
    let m: RegExpExecArray | null;

    // ---- git smart HTTP
    if ((m = /^\/git\/([^/]+)\/([^/]+)\.git(\/.*)$/.exec(u.pathname))) {
      const full = `${m[1]}/${m[2]}`;
      const token = installationToken(auth);
      if (!token) {
        res.writeHead(401, { "www-authenticate": 'Basic realm="GitHub"' });
        return res.end("Bad credentials");
      }
      const push = u.searchParams.get("service") === "git-receive-pack" || m[3] === "/git-receive-pack";
      if (!repos.has(full) || !token.repositories.includes(full)) return notFound(res);
      if (push && token.permissions.contents !== "write") return send(res, 403, { message: "Write access to repository not granted." });
      return gitBackend(req, res, body, `/${full}.git${m[3]}`, u.search.slice(1));
    }

    const json = body.length ? (JSON.parse(body.toString("utf8")) as Record<string, unknown>) : {};

    // ---- app endpoints (JWT)
    if ((m = /^\/repos\/([^/]+)\/([^/]+)\/installation$/.exec(u.pathname)) && req.method === "GET") {
      if (!verifyAppJwt(auth)) return badCredentials(res);
      const repo = repos.get(`${m[1]}/${m[2]}`);
      if (!repo || !repo.installed) return notFound(res);
      const inst = installations.get(repo.installationId)!;
      return send(res, 200, { id: inst.id, account: { login: inst.account }, app_id: Number(appId), target_type: "Organization", permissions: { contents: "write", pull_requests: "write", metadata: "read" } });
    }
    if (u.pathname === "/app/installations" && req.method === "GET") {
      if (!verifyAppJwt(auth)) return badCredentials(res);
      return send(res, 200, [...installations.values()].map((i) => ({ id: i.id, account: { login: i.account, type: "Organization" }, app_id: Number(appId), target_type: "Organization" })));
    }
    if ((m = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(u.pathname)) && req.method === "POST") {
      if (!verifyAppJwt(auth)) return badCredentials(res);
      const inst = installations.get(Number(m[1]));
      if (!inst) return notFound(res);
      const names = (json.repositories as string[] | undefined) ?? [...repos.values()].filter((r) => r.installationId === inst.id && r.installed).map((r) => r.name);
      const selected = names.map((n) => repos.get(`${inst.account}/${n}`));
      if (selected.some((r) => !r || !r.installed || r.installationId !== inst.id)) return send(res, 422, { message: "There is at least one repository that does not exist or is not accessible to the parent installation." });
      const token = `ghs_${crypto.randomBytes(27).toString("base64url").replace(/[^A-Za-z0-9]/g, "x").slice(0, 36)}`;
      const permissions = (json.permissions as Record<string, string> | undefined) ?? { contents: "write", pull_requests: "write" };
      const expiresAt = state.now() + state.tokenTtlMs;
      tokens.set(token, { token, installationId: inst.id, repositories: selected.map((r) => `${r!.owner}/${r!.name}`), permissions, expiresAt, revoked: false });
      issued.push(token);
      return send(res, 201, {
        token,
        expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, "Z"),
        permissions,
        repository_selection: "selected",
        repositories: selected.map((r) => repoJson(r!)),
      });
    }

    // ---- GraphQL (installation token): markPullRequestReadyForReview
    if (u.pathname === "/graphql" && req.method === "POST") {
      const token = installationToken(auth);
      if (!token) return badCredentials(res);
      const id = (json.variables as { id?: string } | undefined)?.id;
      const pr = pulls.find((p) => p.nodeId === id);
      if (!/markPullRequestReadyForReview/.test(String(json.query)) || !pr || !token.repositories.includes(pr.repo)) {
        return send(res, 200, { data: null, errors: [{ type: "NOT_FOUND", message: `Could not resolve to a node with the global id of '${id}'` }] });
      }
      if (token.permissions.pull_requests !== "write") return send(res, 200, { data: null, errors: [{ type: "FORBIDDEN", message: "Resource not accessible by integration" }] });
      if (pr.draft) pr.history.push("ready");
      pr.draft = false;
      return send(res, 200, { data: { markPullRequestReadyForReview: { pullRequest: { isDraft: false } } } });
    }

    // ---- users by id (any valid token)
    if ((m = /^\/user\/(\d+)$/.exec(u.pathname)) && req.method === "GET") {
      if (!installationToken(auth)) return badCredentials(res);
      const person = people.get(Number(m[1]));
      if (!person) return notFound(res);
      return send(res, 200, { login: person.login, id: person.id, node_id: `U_${person.id}`, type: "User", site_admin: false });
    }

    // ---- repository endpoints (installation token)
    if ((m = /^\/repos\/([^/]+)\/([^/]+)(\/.*)?$/.exec(u.pathname))) {
      const full = `${m[1]}/${m[2]}`;
      const rest = m[3] ?? "";
      const token = installationToken(auth);
      if (!token) return badCredentials(res);
      const repo = repos.get(full);
      if (!repo || !token.repositories.includes(full)) return notFound(res);
      const writePulls = () => token.permissions.pull_requests === "write";
      if (rest === "" && req.method === "GET") return send(res, 200, repoJson(repo));
      if ((m = /^\/collaborators\/([^/]+)\/permission$/.exec(rest)) && req.method === "GET") {
        const person = [...people.values()].find((p) => p.login.toLowerCase() === m![1]!.toLowerCase());
        if (!person) return notFound(res);
        // GitHub's legacy `permission` folds maintain into write and triage into read; role_name is exact.
        const role = repo.collaborators.get(person.login) ?? "none";
        const permission = role === "maintain" ? "write" : role === "triage" ? "read" : role;
        return send(res, 200, { permission, role_name: role, user: { login: person.login, id: person.id, type: "User" } });
      }
      if (rest === "/pulls" && req.method === "GET") {
        const head = u.searchParams.get("head");
        const wanted = u.searchParams.get("state") ?? "open";
        const list = pulls.filter(
          (p) => p.repo === full && (!head || `${repo.owner}:${p.head}` === head) && (wanted === "all" || p.state === wanted),
        );
        return send(res, 200, list.map(pullJson));
      }
      if (rest === "/pulls" && req.method === "POST") {
        if (!writePulls()) return send(res, 403, { message: "Resource not accessible by integration" });
        const head = String(json.head);
        if (pulls.some((p) => p.repo === full && p.head === head && p.state === "open")) {
          return send(res, 422, { message: "Validation Failed", errors: [{ message: `A pull request already exists for ${repo.owner}:${head}.` }] });
        }
        try {
          run(repo.gitDir, "rev-parse", "--verify", `refs/heads/${head}`);
        } catch {
          return send(res, 422, { message: "Validation Failed", errors: [{ field: "head", code: "invalid" }] });
        }
        const number = pulls.filter((p) => p.repo === full).length + 1;
        const pr: EmulatedPull = {
          number,
          nodeId: `PR_kw${nextId++}`,
          repo: full,
          head,
          base: String(json.base),
          title: String(json.title),
          body: String(json.body ?? ""),
          draft: json.draft === true,
          state: "open",
          merged: false,
          mergeSha: null,
          history: [json.draft === true ? "opened draft" : "opened"],
        };
        pulls.push(pr);
        return send(res, 201, pullJson(pr));
      }
      if ((m = /^\/pulls\/(\d+)\/reviews(?:\/(\d+)\/comments)?$/.exec(rest)) && req.method === "GET") {
        const pr = pulls.find((p) => p.repo === full && p.number === Number(m![1]));
        if (!pr) return notFound(res);
        const list = reviews.get(`${full}#${pr.number}`) ?? [];
        if (!m[2]) {
          return send(res, 200, list.map((r) => ({ id: r.id, node_id: `PRR_${r.id}`, user: { login: r.user, type: "User" }, body: r.body, state: r.state })));
        }
        const review = list.find((r) => r.id === Number(m![2]));
        if (!review) return notFound(res);
        return send(
          res,
          200,
          review.comments.map((c, i) => ({
            id: review.id * 100 + i,
            pull_request_review_id: review.id,
            path: c.path,
            // GitHub: `line` is null for an outdated comment; `original_line` keeps where it was written.
            line: c.line,
            original_line: c.line,
            body: c.body,
            user: { login: review.user, type: "User" },
          })),
        );
      }
      if ((m = /^\/pulls\/(\d+)(\/merge)?$/.exec(rest))) {
        const pr = pulls.find((p) => p.repo === full && p.number === Number(m![1]));
        if (!pr) return notFound(res);
        if (!m[2] && req.method === "GET") return send(res, 200, pullJson(pr));
        if (!m[2] && req.method === "PATCH") {
          if (!writePulls()) return send(res, 403, { message: "Resource not accessible by integration" });
          if (typeof json.title === "string") pr.title = json.title;
          if (typeof json.body === "string") pr.body = json.body;
          pr.history.push("updated");
          return send(res, 200, pullJson(pr));
        }
        if (m[2] && req.method === "PUT") {
          if (!writePulls() || token.permissions.contents !== "write") return send(res, 403, { message: "Resource not accessible by integration" });
          if (pr.merged || pr.state !== "open" || pr.draft) return send(res, 405, { message: "Pull Request is not mergeable" });
          if (json.merge_method !== "squash") return send(res, 405, { message: "Only squash merges are allowed in this emulator." });
          const sha = squash(pr, String(json.commit_title ?? pr.title));
          if (!sha) return send(res, 405, { message: "Pull Request is not mergeable" });
          return send(res, 200, { sha, merged: true, message: "Pull Request successfully merged" });
        }
      }
      return notFound(res);
    }
    return notFound(res);
  }

  function gitBackend(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer, pathInfo: string, query: string) {
    return new Promise<void>((resolve) => {
      const child = spawn("git", ["http-backend"], {
        env: {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          GIT_PROJECT_ROOT: path.join(root, "git"),
          GIT_HTTP_EXPORT_ALL: "1",
          PATH_INFO: pathInfo,
          REQUEST_METHOD: req.method ?? "GET",
          QUERY_STRING: query,
          CONTENT_TYPE: req.headers["content-type"] ?? "",
          CONTENT_LENGTH: String(body.length),
          REMOTE_USER: "x-access-token",
          REMOTE_ADDR: "127.0.0.1",
          ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"]) } : {}),
          ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
        } as unknown as NodeJS.ProcessEnv,
        stdio: ["pipe", "pipe", "pipe"],
      });
      const out: Buffer[] = [];
      child.stdout.on("data", (c: Buffer) => out.push(c));
      child.stderr.on("data", () => {});
      // http-backend may answer without reading the whole request body.
      child.stdin.on("error", () => {});
      child.stdin.end(body);
      child.on("close", () => {
        const all = Buffer.concat(out);
        let split = all.indexOf("\r\n\r\n");
        let sep = 4;
        if (split < 0) {
          split = all.indexOf("\n\n");
          sep = 2;
        }
        const headerText = all.subarray(0, split).toString("utf8");
        let status = 200;
        const headers: Record<string, string> = {};
        for (const line of headerText.split(/\r?\n/)) {
          const i = line.indexOf(":");
          if (i < 0) continue;
          const name = line.slice(0, i).trim();
          const value = line.slice(i + 1).trim();
          if (name.toLowerCase() === "status") status = Number(value.split(" ")[0]);
          else headers[name] = value;
        }
        res.writeHead(status, headers);
        res.end(all.subarray(split + sep));
        resolve();
      });
    });
  }

  return {
    url,
    requests,
    pulls,
    issued,
    state,
    /** What GitHub knows about an issued token: its repositories and permissions. */
    tokenInfo: (token: string) => tokens.get(token),
    /** An installation of the app on `owner` with a repository `owner/name` whose main branch has `files`. */
    addRepository({ owner, name, files = { "README.md": "# fixture\n" }, installationId }: { owner: string; name: string; files?: Record<string, string>; installationId?: number }) {
      const id = installationId ?? nextId++;
      installations.set(id, { id, account: owner });
      const gitDir = path.join(root, "git", owner, `${name}.git`);
      fs.mkdirSync(gitDir, { recursive: true });
      run(gitDir, "init", "--bare", "-q", "-b", "main");
      const work = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-gh-seed-"));
      run(work, "init", "-q", "-b", "main");
      for (const [file, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(work, file)), { recursive: true });
        fs.writeFileSync(path.join(work, file), content);
      }
      run(work, "add", ".");
      run(work, "commit", "-q", "-m", "init");
      run(work, "push", "-q", gitDir, "main");
      const repo: Repo = { id: nextId++, owner, name, installationId: id, defaultBranch: "main", gitDir, installed: true, collaborators: new Map() };
      repos.set(`${owner}/${name}`, repo);
      return { installationId: id, repoId: repo.id, gitDir };
    },
    /** A GitHub account (id and login), e.g. the identity a Gatehouse user signed in with. */
    addUser({ id, login }: GitHubUser) {
      people.set(id, { id, login });
    },
    /** Give a login a role on a repository: admin | maintain | write | triage | read. */
    setCollaborator(full: string, login: string, role: string) {
      repos.get(full)!.collaborators.set(login, role);
    },
    /** Remove the app from a repository (the repository stays). */
    uninstall(full: string) {
      repos.get(full)!.installed = false;
    },
    /** git in a repository's bare remote. */
    git: (owner: string, name: string, ...args: string[]) => run(repos.get(`${owner}/${name}`)!.gitDir, ...args),
    /** The next `count` requests matching `match` ("METHOD /path") fail with `status`. */
    fail(match: RegExp, count: number, status = 502) {
      faults.push({ match, status, count });
    },
    /** Every token issued so far stops working (expired or revoked at GitHub). */
    revokeTokens() {
      for (const t of tokens.values()) t.revoked = true;
    },
    /** A person merges the pull request on GitHub. */
    mergeByHand(full: string, number: number) {
      const pr = pulls.find((p) => p.repo === full && p.number === number)!;
      return squash(pr, `${pr.title} (#${number})`);
    },
    /** A person submits a review with inline comments on a pull request (what the reviews endpoints then list). */
    addReview(full: string, number: number, review: EmulatedReview) {
      const key = `${full}#${number}`;
      reviews.set(key, [...(reviews.get(key) ?? []), review]);
    },
    pull: (full: string, number: number) => pulls.find((p) => p.repo === full && p.number === number),
    pullJson: (p: EmulatedPull) => pullJson(p),
    repoJson: (full: string) => repoJson(repos.get(full)!),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type GitHubEmulator = Awaited<ReturnType<typeof startGitHubEmulator>>;
