import { describe, expect, it } from "vitest";
import { settingLines } from "./format";

describe("settingLines: a project's default run config in words, not JSON", () => {
  it("flattens nested settings to one line each, with booleans as on/off and lists joined", () => {
    expect(
      settingLines({ trustMode: { planning: "manual" }, maxClarifications: 3, git: { createPR: false, baseBranch: "main" }, excludePaths: ["a", "b"] }),
    ).toEqual([
      { key: "trustMode.planning", value: "manual" },
      { key: "maxClarifications", value: "3" },
      { key: "git.createPR", value: "off" },
      { key: "git.baseBranch", value: "main" },
      { key: "excludePaths", value: "a, b" },
    ]);
  });

  it("has no lines for an empty config (the card then says the defaults apply)", () => {
    expect(settingLines({})).toEqual([]);
  });
});
