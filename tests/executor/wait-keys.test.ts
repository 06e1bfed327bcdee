import { Inngest } from "inngest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendEvents } from "@/lib/executor";
import { waitStats } from "@/lib/executor/events";
import { query } from "@/lib/executor/store";
import { listRuns, startApp, waitFor, waitForRuns } from "./harness";

/*
 * Waits on `event.<a> == async.<b>` (what `match` compiles to) are stored with a key: the incoming event's path and
 * the JSON of the value it must hold there (executor_pending.match_path / match_value). An event finds those waits
 * through the index by its own value, and evaluates every other wait of its name with CEL as before. The answers must
 * be CEL's: a string never equals a number, a wait on a list or map value, or with an `if`, still resolves by CEL.
 */

let app: Awaited<ReturnType<typeof startApp>>;

beforeAll(async () => {
  app = await startApp((origin) => {
    const inngest = new Inngest({ id: "wait-keys", isDev: true, baseUrl: origin });
    const matcher = inngest.createFunction({ id: "matcher", retries: 0, triggers: [{ event: "keys/start" }] }, async ({ event, step }) => {
      const got = await step.waitForEvent("go", { event: "keys/go", match: "data.k", timeout: "1h" });
      return { k: event.data.k, got: got ? got.data.k : null };
    });
    const conditional = inngest.createFunction({ id: "conditional", retries: 0, triggers: [{ event: "keys/cond" }] }, async ({ event, step }) => {
      const got = await step.waitForEvent("go", { event: "keys/go", if: `async.data.n > ${Number(event.data.min)}`, timeout: "1h" });
      return { got: got ? got.data.n : null };
    });
    // As the run workflow waits for a slot: the run's own value written into the expression.
    const literal = inngest.createFunction({ id: "literal", retries: 0, triggers: [{ event: "keys/literal" }] }, async ({ event, step }) => {
      const got = await step.waitForEvent("slot", { event: "keys/slot", if: `async.data.user == '${String(event.data.user)}'`, timeout: "1h" });
      return { user: event.data.user, got: got ? got.data.user : null };
    });
    return { inngest, functions: [matcher, conditional, literal] };
  });
});
afterAll(() => app?.close());

const waitingCount = async (fn: string) =>
  Number((await query<{ n: number }>("SELECT count(*) AS n FROM executor_runs WHERE status = 'waiting' AND fn_id LIKE ?", [`%-${fn}`]))[0]!.n);

describe("waits found by their match key", () => {
  it("stores the key of a `match` wait, and an event resolves exactly the waits its value matches", async () => {
    const keys = ["a", "b", "c", "1", 1, 2, true, null, { o: 1 }, [1]];
    await sendEvents(keys.map((k) => ({ name: "keys/start", data: { k } })));
    await sendEvents({ name: "keys/cond", data: { min: 5 } });
    await waitFor(async () => (await waitingCount("matcher")) === keys.length && (await waitingCount("conditional")) === 1, { what: "every run to wait" });

    const stored = await query<{ match_path: string | null; match_value: string | null; expression: string }>(
      "SELECT match_path, match_value, expression FROM executor_pending WHERE kind = 'wait' AND event_name = 'keys/go' ORDER BY match_value",
    );
    // Primitive trigger values get a key; a list or map value, and the `if` wait, do not (CEL decides for them).
    expect(stored.filter((r) => r.match_path !== null).map((r) => [r.match_path, r.match_value])).toEqual(
      [["data.k", '"1"'], ["data.k", '"a"'], ["data.k", '"b"'], ["data.k", '"c"'], ["data.k", "1"], ["data.k", "2"], ["data.k", "null"], ["data.k", "true"]].sort((x, y) =>
        String(x[1]).localeCompare(String(y[1])),
      ),
    );
    expect(stored.filter((r) => r.match_path === null)).toHaveLength(3);

    const before = waitStats.byIncomingEvent;
    // A number 1 resolves the wait on 1, not the one on "1"; n = 6 also satisfies the conditional wait.
    await sendEvents({ name: "keys/go", data: { k: 1, n: 6 } });
    expect(waitStats.byIncomingEvent - before).toBe(2);
    await sendEvents({ name: "keys/go", data: { k: "1" } });
    await sendEvents({ name: "keys/go", data: { k: { o: 1 } } });
    await sendEvents({ name: "keys/go", data: { k: [1] } });
    await sendEvents({ name: "keys/go", data: { k: null } });
    // No field at the path: no wait of it resolves (CEL: an error, so no match).
    await sendEvents({ name: "keys/go", data: {} });
    expect(waitStats.byIncomingEvent - before).toBe(6);

    const matched = await waitForRuns("matcher", { count: 5 });
    expect(matched.map((r) => r.output).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)))).toEqual(
      [
        { k: "1", got: "1" },
        { k: 1, got: 1 },
        { k: [1], got: [1] },
        { k: null, got: null },
        { k: { o: 1 }, got: { o: 1 } },
      ].sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))),
    );
    expect((await waitForRuns("conditional"))[0]!.output).toEqual({ got: 6 });
    // The rest still wait, each for its own value.
    expect((await listRuns("matcher")).filter((r) => r.status === "waiting").map((r) => r.event.data.k).sort()).toEqual(["a", "b", "c", 2, true].sort());
  });

  it("keys an `if` that compares the incoming event with a string written into it, and resolves only its own", async () => {
    await sendEvents([{ name: "keys/literal", data: { user: "u1" } }, { name: "keys/literal", data: { user: "u2" } }]);
    await waitFor(async () => (await waitingCount("literal")) === 2, { what: "both runs to wait" });
    const stored = await query<{ match_path: string; match_value: string }>(
      "SELECT match_path, match_value FROM executor_pending WHERE kind = 'wait' AND event_name = 'keys/slot' ORDER BY match_value",
    );
    expect(stored).toEqual([
      { match_path: "data.user", match_value: '"u1"' },
      { match_path: "data.user", match_value: '"u2"' },
    ]);
    await sendEvents({ name: "keys/slot", data: { user: "u2" } });
    const [done] = await waitForRuns("literal");
    expect(done!.output).toEqual({ user: "u2", got: "u2" });
    expect((await listRuns("literal")).find((r) => r.event.data.user === "u1")!.status).toBe("waiting");
  });
});
