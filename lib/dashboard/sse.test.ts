import { describe, expect, it } from "vitest";
import { resumeAfter, runEventStream, sseMessage, type RunStreamSource, type StreamedEvent } from "./sse";

const event = (sequence: number, type = "STAGE_STARTED"): StreamedEvent => ({
  sequence,
  type,
  payload: {},
  timestamp: new Date(0).toISOString(),
});

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(stream).text();
}

describe("SSE stream of run events", () => {
  it("formats a message with id and event name on separate lines", () => {
    expect(sseMessage({ id: 7, event: "run-event", data: { a: "x\ny" } })).toBe('id: 7\nevent: run-event\ndata: {"a":"x\\ny"}\n\n');
  });

  it("resumes after Last-Event-ID on reconnect, otherwise after ?after=", () => {
    expect(resumeAfter(new Request("http://x/s?after=3"))).toBe(3);
    expect(resumeAfter(new Request("http://x/s?after=3", { headers: { "last-event-id": "9" } }))).toBe(9);
    expect(resumeAfter(new Request("http://x/s?after=nope"))).toBe(0);
  });

  it("streams events appended while it polls, then ends once the run is terminal and everything was sent", async () => {
    const log = [event(1), event(2)];
    let status = "running";
    let polls = 0;
    const source: RunStreamSource = {
      async events(after) {
        return log.filter((e) => e.sequence > after);
      },
      async state() {
        return { status, lastSequence: log.length };
      },
    };
    const sleep = async () => {
      polls++;
      if (polls === 1) log.push(event(3, "TASK_STARTED"));
      if (polls === 2) {
        log.push(event(4, "RUN_COMPLETED"));
        status = "completed";
      }
    };
    const text = await readAll(runEventStream({ source, after: 1, sleep }));
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual([2, 3, 4]);
    expect(text).toMatch(/event: end\ndata: \{"status":"completed","lastSequence":4\}/);
    expect(text.startsWith("retry: 1000\n\n")).toBe(true);
  });

  it("stops when the client goes away", async () => {
    const controller = new AbortController();
    const source: RunStreamSource = {
      async events() {
        return [];
      },
      async state() {
        return { status: "awaiting_approval", lastSequence: 5 };
      },
    };
    const sleep = async () => controller.abort();
    const text = await readAll(runEventStream({ source, after: 5, signal: controller.signal, sleep }));
    expect(text).not.toContain("event: end");
  });

  it("closes after its maximum lifetime so the browser reconnects and resumes", async () => {
    let t = 0;
    const source: RunStreamSource = {
      async events() {
        return [];
      },
      async state() {
        return { status: "running", lastSequence: 0 };
      },
    };
    const text = await readAll(
      runEventStream({ source, after: 0, maxDurationMs: 1000, now: () => t, sleep: async () => void (t += 600) }),
    );
    expect(text).toBe("retry: 1000\n\n");
  });
});
