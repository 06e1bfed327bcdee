import { describe, expect, it } from "vitest";
import { approachLabel, approachOf, approachRequest } from "./approach";

describe("approaches of an explore-N group", () => {
  it("reads back which approach a request is, with or without a hint", () => {
    const plain = approachRequest({ request: "Write a note", index: 2, of: 3 });
    expect(plain).toBe("Write a note\n\nApproach 2 of 3");
    expect(approachOf(plain)).toEqual({ index: 2, of: 3, note: null });
    expect(approachLabel(approachOf(plain)!)).toBe("approach 2 of 3");

    const hinted = approachRequest({ request: "Write a note", index: 1, of: 2, note: " keep it minimal " });
    expect(approachOf(hinted)).toEqual({ index: 1, of: null, note: "keep it minimal" });
    expect(approachLabel(approachOf(hinted)!)).toBe("approach 1: keep it minimal");
  });

  it("a run started on its own is no approach, even when its request mentions one", () => {
    expect(approachOf("Write a note")).toBeNull();
    expect(approachOf("Approach 2 of 3")).toBeNull();
    expect(approachOf("Write a note\n\nApproach 2 of 3\n\nand more")).toBeNull();
  });
});
