import { describe, expect, it } from "vitest";
import { celMatches, eventMatchValue, waitMatchKey } from "./cel";

/*
 * `event.<path> == async.<path>` is decided without the CEL interpreter when both sides are primitives. Wrapped in
 * parentheses, the same expression goes through the interpreter: both must answer alike for every pair of values,
 * including the ones the shortcut hands over to CEL (missing fields, lists, maps, a path through a non-map).
 */

const values: unknown[] = ["a", "b", "", "1", 1, 2, 1.5, 0, -0, true, false, null, [1], ["a"], { x: 1 }, {}];

describe("celMatches: the shortcut for `event.<path> == async.<path>` agrees with CEL", () => {
  it("for every pair of primitive, list and map values, and for missing fields", () => {
    let compared = 0;
    for (const a of [...values, undefined]) {
      for (const b of [...values, undefined]) {
        const event = { name: "t", data: a === undefined ? {} : { k: a } };
        const async = { name: "u", data: b === undefined ? {} : { k: b } };
        const fast = celMatches("event.data.k == async.data.k", { event, async });
        const cel = celMatches("(event.data.k == async.data.k)", { event, async });
        expect({ a, b, fast }).toEqual({ a, b, fast: cel });
        compared++;
      }
    }
    expect(compared).toBe(17 * 17);
    // The interesting answers, stated: equal strings and numbers match, -0 equals 0, null equals null, and a
    // missing field, a list or a map never matches through the shortcut's own decision.
    const match = (a: unknown, b: unknown) => celMatches("event.data.k == async.data.k", { event: { data: { k: a } }, async: { data: { k: b } } });
    expect(match("a", "a")).toBe(true);
    expect(match(1, 1)).toBe(true);
    expect(match(-0, 0)).toBe(true);
    expect(match(null, null)).toBe(true);
    expect(match("1", 1)).toBe(false);
    expect(match(true, 1)).toBe(false);
  });

  it("for paths through a value that is not a map, deeper paths, and other roots", () => {
    const bindings = { event: { data: "text", user: { id: "u1", org: { id: 7 } } }, async: { data: { user: { id: "u1" }, org: 7 } } };
    for (const [fast, slow] of [
      ["event.data.k == async.data.k", "(event.data.k == async.data.k)"],
      ["event.user.id == async.data.user.id", "(event.user.id == async.data.user.id)"],
      ["event.user.org.id == async.data.org", "(event.user.org.id == async.data.org)"],
      ["event.user.constructor == async.data.constructor", "(event.user.constructor == async.data.constructor)"],
      ["nothing.x == async.data.org", "(nothing.x == async.data.org)"],
    ] as const) {
      expect({ fast, result: celMatches(fast, bindings) }).toEqual({ fast, result: celMatches(slow, bindings) });
    }
    expect(celMatches("event.user.id == async.data.user.id", bindings)).toBe(true);
    expect(celMatches("event.user.org.id == async.data.org", bindings)).toBe(true);
  });
});

describe("waitMatchKey: a keyed wait matches exactly the events CEL says it matches", () => {
  const triggers = [{ data: { k: "a" } }, { data: { k: 1 } }, { data: { k: true } }, { data: { k: null } }, { data: { k: "1" } }];
  const events = [...values, undefined].map((v) => ({ name: "e", data: v === undefined ? {} : { k: v } }));
  const expressions = [
    "event.data.k == async.data.k",
    "async.data.k == event.data.k",
    "async.data.k == 'a'",
    'async.data.k == "1"',
    "'a' == async.data.k",
    "async.data.k == ''",
  ];

  it("for `match` expressions, literal comparisons, and every pair of trigger and event values", () => {
    let keyed = 0;
    for (const expression of expressions) {
      for (const trigger of triggers) {
        const key = waitMatchKey(expression, trigger);
        expect(key).not.toBeNull();
        keyed++;
        for (const event of events) {
          const byKey = eventMatchValue(event, key!.path) === key!.value;
          expect({ expression, trigger, event, byKey }).toEqual({ expression, trigger, event, byKey: celMatches(`(${expression})`, { event: trigger, async: event }) });
        }
      }
    }
    expect(keyed).toBe(expressions.length * triggers.length);
  });

  it("has no key for what only CEL can decide", () => {
    expect(waitMatchKey(null, { data: { k: "a" } })).toBeNull();
    expect(waitMatchKey("event.data.k == async.data.k", { data: { k: { o: 1 } } })).toBeNull(); // a map on the run's side
    expect(waitMatchKey("event.data.k == async.data.k", { data: {} })).toBeNull(); // nothing on the run's side
    expect(waitMatchKey("event.data.k == event.data.j", { data: { k: 1 } })).toBeNull(); // no incoming event in it
    expect(waitMatchKey("async.data.n > 5", {})).toBeNull();
    expect(waitMatchKey("async.data.k == 'a\\'b'", {})).toBeNull(); // an escape: left to CEL
    expect(waitMatchKey("async.data.k == 'a' && async.data.j == 'b'", {})).toBeNull();
    expect(waitMatchKey("async.data.k == 'u1'", {})).toEqual({ path: "data.k", value: '"u1"' });
  });
});
