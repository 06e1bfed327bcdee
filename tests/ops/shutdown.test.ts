import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { installGracefulShutdown } from "@/lib/ops/shutdown";

function harness(stop: () => Promise<void>) {
  const target = new EventEmitter();
  const exits: number[] = [];
  const said: string[] = [];
  installGracefulShutdown({ stop, target, exit: (code) => void exits.push(code), say: (l) => void said.push(l) });
  return { target, exits, said };
}

describe("graceful shutdown", () => {
  it("SIGTERM stops the executor first, then exits 0", async () => {
    const order: string[] = [];
    let release!: () => void;
    const { target, exits } = harness(() => new Promise<void>((r) => (release = () => (order.push("stopped"), r()))));
    target.emit("SIGTERM");
    await new Promise((r) => setImmediate(r));
    // Still stopping: no exit yet.
    expect(exits).toEqual([]);
    release();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(["stopped"]);
    expect(exits).toEqual([0]);
  });

  it("a second signal while stopping exits at once with 1; a failed stop exits 1 and says why", async () => {
    const slow = harness(() => new Promise<void>(() => {}));
    slow.target.emit("SIGINT");
    slow.target.emit("SIGTERM");
    expect(slow.exits).toEqual([1]);

    const failing = harness(async () => {
      throw new Error("database locked");
    });
    failing.target.emit("SIGTERM");
    await new Promise((r) => setImmediate(r));
    expect(failing.exits).toEqual([1]);
    expect(failing.said.join("\n")).toContain("database locked");
  });
});
