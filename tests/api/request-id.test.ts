import { afterEach, describe, expect, it, vi } from "vitest";
import { json, route } from "@/lib/http";
import { log } from "@/lib/log";

/** Production logs are JSON lines; every line written while a request is handled carries that request's id. */

const lines: string[] = [];
const capture = (line: unknown) => void lines.push(String(line));

afterEach(() => {
  lines.length = 0;
  vi.restoreAllMocks();
});

const handler = route({ public: true }, async () => {
  log.warn("inside the handler", { step: 1 });
  await new Promise((r) => setTimeout(r, 5));
  log.warn("after an await", { step: 2 });
  return json({ ok: true });
});

const call = (headers: Record<string, string> = {}) => handler(new Request("http://127.0.0.1/api/x", { headers }), { params: Promise.resolve({}) } as never);

describe("request ids", () => {
  it("each request gets an id, returned in X-Request-Id and on every log line it writes, also after an await", async () => {
    vi.spyOn(console, "warn").mockImplementation(capture);
    const [a, b] = await Promise.all([call(), call()]);
    const ids = [a!.headers.get("x-request-id"), b!.headers.get("x-request-id")];
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(ids[1]).not.toBe(ids[0]);
    const logged = lines.map((l) => JSON.parse(l) as { requestId?: string; step?: number });
    expect(logged).toHaveLength(4);
    for (const id of ids) expect(logged.filter((l) => l.requestId === id).map((l) => l.step).sort()).toEqual([1, 2]);
  });

  it("keeps a proxy's id when it looks like one, and replaces anything else", async () => {
    vi.spyOn(console, "warn").mockImplementation(capture);
    expect((await call({ "x-request-id": "lb-2f9c1e0a-77" })).headers.get("x-request-id")).toBe("lb-2f9c1e0a-77");
    for (const bad of ["short", "has spaces in it, and more", "x".repeat(200), '{"level":"error"}']) {
      const id = (await call({ "x-request-id": bad })).headers.get("x-request-id");
      expect(id).not.toBe(bad);
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});
