import { describe, expect, it } from "vitest";
import { eventSchema, parseEvents, plainEvent } from "@/lib/executor/events";

/**
 * Ingestion checks each event by hand on its hot path (plainEvent) and leaves everything it does not accept to
 * eventSchema. The hand check must accept only events the schema accepts, as the schema gives them back, and accept
 * what the SDK's send() posts (else every event pays for zod again).
 */
const sent = { name: "app/thing.done", data: { k: 1, nested: { a: [1] } }, id: "01J0", ts: 1_700_000_000_000, v: "2024-01-01.1", user: { id: "u" } };
const events: Array<[string, unknown, boolean]> = [
  ["the SDK's event", sent, true],
  ["only a name", { name: "a" }, true],
  ["null data and id", { name: "a", data: null, id: null, ts: null, v: null }, true],
  ["an extra field", { name: "a", extra: [1] }, true],
  ["a name to trim", { name: " a " }, false],
  ["a blank name", { name: "   " }, false],
  ["no name", { data: {} }, false],
  ["data as a list", { name: "a", data: [1] }, false],
  ["data as a string", { name: "a", data: "x" }, false],
  ["an empty id", { name: "a", id: "" }, false],
  ["a numeric id", { name: "a", id: 5 }, false],
  ["a string ts", { name: "a", ts: "now" }, false],
  ["a numeric v", { name: "a", v: 2 }, false],
  ["a list", [sent], false],
  ["null", null, false],
];

describe("event shape: the hand check on the hot path", () => {
  it("accepts only what the schema accepts, as the schema gives it back, and the SDK's own events", () => {
    for (const [what, event, sdk] of events) {
      const byHand = plainEvent(event);
      const bySchema = eventSchema.safeParse(event);
      if (byHand) {
        expect(bySchema.success, what).toBe(true);
        expect(byHand, what).toEqual(bySchema.data);
      }
      if (sdk) expect(byHand, what).not.toBeNull();
    }
  });

  it("still trims a name and refuses a bad event with the schema's message", () => {
    expect(parseEvents({ name: " a " })[0]?.name).toBe("a");
    expect(() => parseEvents([{ name: "a" }, { name: "a", data: [1] }])).toThrow(/^event 1: data: /);
  });
});
