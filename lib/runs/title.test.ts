import { describe, expect, it } from "vitest";
import { runTitle } from "./title";

describe("runTitle", () => {
  it("is the first line of a one-line request", () => {
    expect(runTitle("Add a health endpoint")).toBe("Add a health endpoint");
  });

  it("skips blank lines and strips heading and emphasis syntax", () => {
    expect(runTitle("\n\n## Add **dark mode** to `settings`\n\nMore text")).toBe("Add dark mode to settings");
  });

  it("never takes a line from inside a code fence or a demo marker", () => {
    const request = "```file:README.md\n# Big heading\n```\n[ask: Which colour? | red | blue]\nWrite the README";
    expect(runTitle(request)).toBe("Write the README");
  });

  it("drops markers inline and keeps the words around them", () => {
    expect(runTitle("Ship it [fail-validation: 1] now")).toBe("Ship it now");
  });

  it("cuts a long line at a word boundary with an ellipsis", () => {
    const title = runTitle(`${"word ".repeat(40)}end`);
    expect(title.length).toBeLessThanOrEqual(80);
    expect(title.endsWith("word…")).toBe(true);
  });

  it("carries no control characters: a terminal escape in the request becomes a space (#29, finding 8)", () => {
    expect(runTitle("ANSI \x1b[2J\x1b]0;TITLE\x07 done\u202e")).toBe("ANSI [2J ]0;TITLE done");
  });

  it("says so when the request has nothing but code and markers", () => {
    expect(runTitle("```file:a.txt\nx\n```\n[run: ls]")).toBe("Untitled run");
  });
});
