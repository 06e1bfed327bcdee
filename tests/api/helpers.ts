import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export const ORIGIN = "http://127.0.0.1:3000";
export const ADMIN = { authorization: `Bearer ${process.env.GATEHOUSE_ADMIN_TOKEN}` };

type Handler = (request: Request, context: { params: Promise<any> }) => Promise<Response>;

/** Call a route handler as Next would, with a real Request. */
export async function call(
  handler: Handler,
  {
    method = "GET",
    path: urlPath = "/",
    params = {},
    headers = {},
    body,
    rawBody,
  }: {
    method?: string;
    path?: string;
    params?: Record<string, string>;
    headers?: Record<string, string>;
    body?: unknown;
    rawBody?: string;
  } = {},
) {
  const init: RequestInit = { method, headers: { ...headers } };
  if (rawBody !== undefined) init.body = rawBody;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] = "application/json";
  }
  const response = await handler(new Request(`${ORIGIN}${urlPath}`, init), { params: Promise.resolve(params) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : null };
}

/** A real git repository in a temp dir. */
export function makeRepo(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-repo-"));
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.com", ...args], { cwd: dir });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(dir, "README.md"), "# test\n");
  git("add", ".");
  git("commit", "-q", "-m", "init");
  return dir;
}
