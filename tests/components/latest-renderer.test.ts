import { describe, expect, it } from "vitest";
import { latestRenderer } from "@/components/run/latest-renderer";

/*
 * The live plan diagram's renderer (components/run/mermaid-diagram.tsx): a 90-task run's diagram gets a new source at
 * every task status, and rendering each one kept the browser's main thread busy for tens of seconds. Only the newest
 * source is rendered, one render at a time.
 */

/** A render the test finishes by hand: which inputs were started, and a way to settle the one under way. */
function manualRender() {
  const started: string[] = [];
  const pending: Array<{ resolve: (v: string) => void; reject: (e: unknown) => void }> = [];
  const render = (input: string) =>
    new Promise<string>((resolve, reject) => {
      started.push(input);
      pending.push({ resolve, reject });
    });
  return { started, render, settle: (value?: string) => pending.shift()!.resolve(value ?? "svg"), fail: (e: unknown) => pending.shift()!.reject(e) };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("latestRenderer", () => {
  it("renders a burst as the one under way and the last: the sources in between are never rendered", async () => {
    const m = manualRender();
    const reported: string[] = [];
    const r = latestRenderer(m.render, (res) => reported.push(res.ok ? `${res.input}=${res.value}` : `${res.input}!`));
    r.request("v1");
    for (const v of ["v2", "v3", "v4", "v5"]) r.request(v);
    await tick();
    expect(m.started).toEqual(["v1"]);
    m.settle("a");
    await tick();
    expect(m.started).toEqual(["v1", "v5"]);
    m.settle("b");
    await tick();
    expect(reported).toEqual(["v1=a", "v5=b"]);
    // Nothing new asked: nothing more rendered.
    await tick();
    expect(m.started).toEqual(["v1", "v5"]);
  });

  it("reports a failed render and goes on with the next request", async () => {
    const m = manualRender();
    const reported: string[] = [];
    const r = latestRenderer(m.render, (res) => reported.push(res.ok ? `${res.input}=${res.value}` : `${res.input}!${String(res.error)}`));
    r.request("bad");
    await tick();
    r.request("good");
    m.fail("parse error");
    await tick();
    m.settle("ok");
    await tick();
    expect(reported).toEqual(["bad!parse error", "good=ok"]);
  });

  it("rests between two renders as long as the gap the last render's time asks for, and starts the first at once", async () => {
    const m = manualRender();
    const waits: number[] = [];
    let clock = 0;
    let release: () => void = () => {};
    const wait = (ms: number) => {
      waits.push(ms);
      return new Promise<void>((r) => (release = r));
    };
    const r = latestRenderer(m.render, () => {}, { gap: (ms) => Math.max(250, 3 * ms), wait, now: () => clock });
    r.request("v1");
    await tick();
    expect(m.started).toEqual(["v1"]);
    expect(waits).toEqual([]);
    r.request("v2");
    clock += 1_200; // the render took 1.2 s
    m.settle();
    await tick();
    expect(waits).toEqual([3_600]);
    expect(m.started).toEqual(["v1"]);
    r.request("v3"); // asked during the gap: it replaces v2
    release();
    await tick();
    expect(m.started).toEqual(["v1", "v3"]);
  });

  it("after stop, reports nothing and renders nothing more", async () => {
    const m = manualRender();
    const reported: string[] = [];
    const r = latestRenderer(m.render, (res) => reported.push(String(res.input)));
    r.request("v1");
    r.request("v2");
    await tick();
    r.stop();
    m.settle();
    await tick();
    r.request("v3");
    await tick();
    expect(reported).toEqual([]);
    expect(m.started).toEqual(["v1"]);
  });
});
