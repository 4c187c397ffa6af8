import { describe, expect, it } from "vitest";

import { shellJoin, shellSplit } from "./shlex";

// Each case as Python's shlex.split / shlex.join answers it (the server splits with shlex).
const SPLITS: [string, string[]][] = [
  ["python train.py --lr 1e-6", ["python", "train.py", "--lr", "1e-6"]],
  ["  a   b  ", ["a", "b"]],
  [`echo 'a b' "c d"`, ["echo", "a b", "c d"]],
  ["a\\ b", ["a b"]],
  [`"a\\"b" "c\\\\d" "e\\f"`, ['a"b', "c\\d", "e\\f"]],
  ["x''y", ["xy"]],
  ["''", [""]],
  [`a"b c"d`, ["ab cd"]],
  ["bash -c 'echo $HOME | wc'", ["bash", "-c", "echo $HOME | wc"]],
  ["é ü", ["é", "ü"]],
  ["a\tb\nc", ["a", "b", "c"]],
  ['--flag="x y"', ["--flag=x y"]],
  ["a\u00a0b", ["a\u00a0b"]],
  ["", []],
];

describe("shellSplit", () => {
  it.each(SPLITS)("splits %j as shlex.split does", (line, words) => {
    expect(shellSplit(line)).toEqual({ ok: true, words });
  });

  it.each([
    ["'abc", "no closing quotation"],
    ['a "b', "no closing quotation"],
    ["a\\", "no escaped character"],
  ])("refuses %j as shlex does", (line, error) => {
    expect(shellSplit(line)).toEqual({ ok: false, error });
  });
});

describe("shellJoin", () => {
  it("quotes as shlex.join does", () => {
    expect(shellJoin(["python", "a b", "it's", ""])).toBe(`python 'a b' 'it'"'"'s' ''`);
    expect(shellJoin(["a=b", "x/y.z", "é"])).toBe("a=b x/y.z 'é'");
  });

  it("joins words that split back into themselves", () => {
    for (const [, words] of SPLITS) {
      expect(shellSplit(shellJoin(words))).toEqual({ ok: true, words });
    }
  });
});
