import { describe, expect, it } from "vitest";
import { BufferedRequest, BufferedResponse, callFunction, type CallBody } from "@/lib/executor/protocol";

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

describe("in-process calls: the event API's answer", () => {
  it("is read back as JSON without a stream built for it, and gives the same bytes and headers as Response.json", async () => {
    const value = { ids: ["01H", "ü"], status: 200 };
    const plain = Response.json(value);
    const Original = globalThis.ReadableStream;
    let made = 0;
    globalThis.ReadableStream = class extends Original<unknown> {
      constructor(...args: ConstructorParameters<typeof ReadableStream>) {
        super(...args);
        made++;
      }
    } as typeof ReadableStream;
    let read: unknown;
    let response: Response;
    try {
      response = BufferedResponse.of(value);
      read = await response.json();
    } finally {
      globalThis.ReadableStream = Original;
    }
    expect(read).toEqual(value);
    // Response.json builds a stream for its body and json() drains it; the buffered answer builds none to be read.
    expect(made).toBe(0);
    expect(response).toBeInstanceOf(Response);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe(plain.headers.get("content-type"));
    const text = await plain.text();
    expect(await response.text()).toBe(text);
    expect(Buffer.from(await response.arrayBuffer()).toString()).toBe(text);
    expect(await new Response(response.body).text()).toBe(text);
    expect(await response.clone().json()).toEqual(value);
    expect(await (await response.blob()).text()).toBe(text);
    expect(Buffer.from(await response.bytes()).toString()).toBe(text);
    const refused = BufferedResponse.of({ error: "no" }, { status: 400, headers: { "x-a": "1" } });
    expect([refused.status, refused.headers.get("x-a"), refused.headers.get("content-type")]).toEqual([400, "1", "application/json"]);
  });

  it("answers an event sent in-process with a buffered response the SDK reads", async () => {
    const { handleEventBody } = await import("@/lib/executor");
    const response = await handleEventBody(JSON.stringify({ name: "probe/buffered", data: {} }));
    expect(response).toBeInstanceOf(BufferedResponse);
    const body = (await response.json()) as { ids: string[]; status: number };
    expect(body.status).toBe(200);
    expect(body.ids).toHaveLength(1);
  });
});
