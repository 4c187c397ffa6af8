import { describe, expect, it } from "vitest";

import { countLines, draftsToJsonl, lineErrors, lineText, splitTags } from "./jsonl";

describe("prompts as JSON Lines", () => {
  it("leaves wholly empty rows out and says which row each line came from", () => {
    const { jsonl, rowOfLine } = draftsToJsonl([
      { prompt: "a?", reference: "", tags: "" },
      { prompt: " ", reference: "", tags: " , " },
      { prompt: "", reference: "r", tags: "x, y ,," },
    ]);
    expect(jsonl.split("\n").map((line) => JSON.parse(line) as unknown)).toEqual([
      { prompt: "a?" },
      { prompt: "", reference: "r", tags: ["x", "y"] },
    ]);
    expect(rowOfLine).toEqual([0, 2]);
  });

  it("reads the server's line paths, the line itself under the empty field", () => {
    const byLine = lineErrors({
      "jsonl[12].tags": ["t"],
      "jsonl[3].prompt": ["p"],
      "jsonl[3]": ["not JSON"],
      jsonl: ["no prompt"],
      name: ["taken"],
    });
    expect([...byLine.keys()]).toEqual([3, 12]);
    expect(Object.fromEntries(byLine.get(3) ?? [])).toEqual({ prompt: ["p"], "": ["not JSON"] });
  });

  it("keeps a typed prompt on one line as Python's splitlines() reads it", () => {
    const { jsonl } = draftsToJsonl([{ prompt: "a\u2028b\u0085c\nd", reference: "", tags: "" }]);
    expect(jsonl).not.toMatch(/[\n\u2028\u0085]/);
    expect(JSON.parse(jsonl)).toEqual({ prompt: "a\u2028b\u0085c\nd" });
  });

  it("numbers lines where Python's splitlines() splits", () => {
    expect(lineText("one\u2028two\fthree", 3)).toBe("three");
    expect(countLines("a\u2029b\x85c")).toBe(3);
  });

  it("counts and quotes lines as the server numbers them, blank ones included", () => {
    const text = 'one\n\n{"promt": 1}\r\nfour';
    expect(lineText(text, 3)).toBe('{"promt": 1}');
    expect(lineText("x".repeat(200), 1, 10)).toBe("xxxxxxxxxx…");
    expect(countLines(text)).toBe(3);
    expect(splitTags(" a ,b,, ")).toEqual(["a", "b"]);
  });
});
