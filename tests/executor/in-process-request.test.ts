import { describe, expect, it } from "vitest";
import { BufferedRequest, callFunction, type CallBody } from "@/lib/executor/protocol";

/**
 * The executor's call to an in-process serve handler carries its body as the string it already is: the handler reads
 * it (text, json, arrayBuffer, or the body stream) without a ReadableStream built and drained for it on every call.
 */
describe("in-process calls: the request's body", () => {
  it("reaches the handler as a BufferedRequest that reads back the same bytes every way", async () => {
    const seen: Request[] = [];
    const body = { event: { name: "e", data: { k: "ü" } }, events: [], steps: {}, ctx: { run_id: "r" }, version: 2 } as unknown as CallBody;
    const outcome = await callFunction({
      target: {
        url: "http://app.test/api/inngest",
        handler: async (request) => {
          seen.push(request);
          return new Response(JSON.stringify({ ok: true }), { status: 200, headers: { "x-inngest-sdk": "js:v4" } });
        },
      },
      fnId: "f",
      stepId: "step",
      body,
      timeoutMs: 5_000,
      runId: "r",
    });
    expect(outcome).toEqual({ kind: "complete", data: { ok: true } });
    const request = seen[0]!;
    expect(request).toBeInstanceOf(BufferedRequest);
    expect(request).toBeInstanceOf(Request);
    expect(request.method).toBe("POST");
    expect(request.headers.get("host")).toBe("app.test");
    expect(new URL(request.url).searchParams.get("fnId")).toBe("f");
    const text = JSON.stringify(body);
    expect(await request.text()).toBe(text);
    expect(await request.json()).toEqual(body);
    expect(Buffer.from(await request.arrayBuffer()).toString()).toBe(text);
    expect(await new Response(request.body).text()).toBe(text);
    expect(await request.clone().text()).toBe(text);
  });
});
