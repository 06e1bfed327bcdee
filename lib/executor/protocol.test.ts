import { describe, expect, it } from "vitest";
import { deadline, parseDuration, readCallResponse } from "./protocol";

const sdk = { "x-inngest-sdk": "inngest-js:v4.24.0", "content-type": "application/json" };

describe("durations", () => {
  it("reads Inngest duration strings", () => {
    expect(parseDuration("10s")).toBe(10_000);
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration("2d")).toBe(172_800_000);
    expect(parseDuration("1500ms")).toBe(1500);
  });

  it("rejects what it cannot read, with the value in the message", () => {
    expect(() => parseDuration("soon")).toThrow(/Invalid duration "soon"/);
    expect(() => parseDuration("10s and then some")).toThrow(/Invalid duration/);
  });

  it("takes an ISO time as an absolute deadline", () => {
    expect(deadline("2030-01-01T00:00:00.000Z", 0)).toBe(Date.parse("2030-01-01T00:00:00.000Z"));
    expect(deadline("5s", 1000)).toBe(6000);
  });
});

describe("reading SDK responses", () => {
  it("200 is the function's result", async () => {
    expect(await readCallResponse(new Response('{"a":1}', { status: 200, headers: sdk }), "app")).toEqual({ kind: "complete", data: { a: 1 } });
  });

  it("206 is a list of ops; a single op object is accepted as a list", async () => {
    const one = await readCallResponse(new Response('{"id":"h","op":"RunComplete","data":2}', { status: 206, headers: sdk }), "app");
    expect(one).toMatchObject({ kind: "ops", ops: [{ id: "h", op: "RunComplete", data: 2 }] });
  });

  it("500 with Retry-After is retriable after that delay; 400 + X-Inngest-No-Retry is final", async () => {
    const retry = await readCallResponse(
      new Response('{"name":"Error","message":"later"}', { status: 500, headers: { ...sdk, "x-inngest-no-retry": "false", "retry-after": "3" } }),
      "app",
    );
    expect(retry).toMatchObject({ kind: "error", retriable: true, retryAfterMs: 3000, error: { message: "later" } });
    const final = await readCallResponse(
      new Response('{"name":"NonRetriableError","message":"no"}', { status: 400, headers: { ...sdk, "x-inngest-no-retry": "true" } }),
      "app",
    );
    expect(final).toMatchObject({ kind: "error", retriable: false, error: { name: "NonRetriableError" } });
  });

  it("a 401 explains that the app must run in dev mode", async () => {
    const res = await readCallResponse(new Response('{"message":"Unauthorized"}', { status: 401, headers: sdk }), "http://app");
    expect(res).toMatchObject({ kind: "error", retriable: false, error: { message: expect.stringContaining("INNGEST_DEV=1") } });
  });

  it("a response without the SDK header is an error, not a result", async () => {
    const res = await readCallResponse(new Response("ok", { status: 200 }), "http://app");
    expect(res).toMatchObject({ kind: "error", retriable: true, error: { message: expect.stringContaining("X-Inngest-Sdk") } });
  });
});
