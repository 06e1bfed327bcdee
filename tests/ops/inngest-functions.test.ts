import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { functions } from "@/inngest";

/*
 * The served Inngest functions: their ids are persisted (executor runs, Inngest Cloud's sync), so moving a function to
 * another file must not change them; and inngest/functions/ holds one function per file, nothing else.
 */

const FUNCTIONS_DIR = path.join(process.cwd(), "inngest", "functions");

describe("inngest functions", () => {
  it("serves the same function ids as before the functions were split one per file", () => {
    expect(functions.map((f) => f.id()).sort()).toEqual(
      [
        "github-webhook",
        "health-check",
        "notify-decision",
        "notify-redeliver",
        "notify-run",
        "run-cancelled-cleanup",
        "run-decision-reannounce",
        "run-merge",
        "run-workflow",
      ].sort(),
    );
  });

  it("has exactly one createFunction in every file of inngest/functions/, and every one is served", () => {
    const files = readdirSync(FUNCTIONS_DIR).filter((f) => f.endsWith(".ts"));
    const counts = Object.fromEntries(files.map((f) => [f, readFileSync(path.join(FUNCTIONS_DIR, f), "utf8").split("inngest.createFunction(").length - 1]));
    expect(counts).toEqual(Object.fromEntries(files.map((f) => [f, 1])));
    expect(files.length).toBe(functions.length);
  });
});
