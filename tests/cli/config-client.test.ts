import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { configPath, resolveCredentials, saveCredentials } from "@/cli/config";
import { ApiClient, parseSse } from "@/cli/client";
import { CliError } from "@/cli/errors";
import { freshHome } from "./helpers";

describe("CLI config: where the login lives and who may read it", () => {
  it("uses $XDG_CONFIG_HOME/gatehouse, else ~/.config/gatehouse", () => {
    expect(configPath({ env: { XDG_CONFIG_HOME: "/x/cfg", HOME: "/home/u" } })).toBe("/x/cfg/gatehouse/config.json");
    expect(configPath({ env: { HOME: "/home/u" } })).toBe("/home/u/.config/gatehouse/config.json");
  });

  it("writes the file 0600 (the directory 0700), even over an existing world-readable file", () => {
    const home = freshHome();
    const env = { HOME: home };
    const file = configPath({ env });
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, "{}", { mode: 0o644 });
    saveCredentials({ env, credentials: { url: "http://127.0.0.1:3000", token: "secret-token" } });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(resolveCredentials({ env })).toEqual({ url: "http://127.0.0.1:3000", token: "secret-token" });
  });

  it("GATEHOUSE_URL and GATEHOUSE_TOKEN win over the stored login; a broken file says to log in again", () => {
    const home = freshHome();
    const env = { HOME: home };
    saveCredentials({ env, credentials: { url: "http://stored:3000", token: "stored" } });
    expect(resolveCredentials({ env: { ...env, GATEHOUSE_URL: "https://remote.example/", GATEHOUSE_TOKEN: "env" } })).toEqual({
      url: "https://remote.example",
      token: "env",
    });
    fs.writeFileSync(configPath({ env }), "not json");
    const error = (() => {
      try {
        resolveCredentials({ env });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toMatch(/is not a valid Gatehouse config; run `npx gatehouse login` again/);
  });
});

describe("CLI SSE parser", () => {
  it("reassembles messages split across chunks at any byte, skips comments, and keeps ids and event names", async () => {
    const text = 'retry: 1000\n\nid: 1\nevent: run-event\ndata: {"sequence":1,"type":"RUN_CREATED"}\n\n: keep-alive\n\nid: 2\r\nevent: run-event\r\ndata: {"sequence":2,"type":"RUN_STARTED","payload":{"é":"ü"}}\r\n\r\nevent: end\ndata: {"status":"completed"}\n\n';
    const bytes = new TextEncoder().encode(text);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 3) controller.enqueue(bytes.slice(i, i + 3));
        controller.close();
      },
    });
    const messages = [];
    for await (const m of parseSse(body)) messages.push(m);
    expect(messages).toEqual([
      { id: "1", event: "run-event", data: { sequence: 1, type: "RUN_CREATED" } },
      { id: "2", event: "run-event", data: { sequence: 2, type: "RUN_STARTED", payload: { é: "ü" } } },
      { id: null, event: "end", data: { status: "completed" } },
    ]);
  });
});

describe("CLI event stream client", () => {
  it("reconnects with Last-Event-ID when the server ends a response early, and resolves with the end message", async () => {
    const seen: Array<string | undefined> = [];
    const auth: Array<string | undefined> = [];
    const server = http.createServer((req, res) => {
      seen.push(req.headers["last-event-id"] as string | undefined);
      auth.push(req.headers.authorization);
      res.writeHead(200, { "content-type": "text/event-stream" });
      const after = Number(req.headers["last-event-id"] ?? 0);
      if (after < 2) {
        // The first response is cut after two events, as a server capping a response's lifetime does.
        res.end('id: 1\nevent: run-event\ndata: {"sequence":1}\n\nid: 2\nevent: run-event\ndata: {"sequence":2}\n\n');
      } else {
        res.end('id: 3\nevent: run-event\ndata: {"sequence":3}\n\nevent: end\ndata: {"status":"completed"}\n\n');
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const client = new ApiClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: "tok" });
      const got: unknown[] = [];
      const end = await client.stream({ path: "/s", onEvent: ({ data }) => void got.push(data) });
      expect(got).toEqual([{ sequence: 1 }, { sequence: 2 }, { sequence: 3 }]);
      expect(seen).toEqual(["0", "2"]);
      expect(auth).toEqual(["Bearer tok", "Bearer tok"]);
      expect(end).toEqual({ status: "completed" });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
