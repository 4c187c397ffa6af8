import { describe, expect, it } from "vitest";

import {
  artifactView,
  breadcrumbs,
  formatBytes,
  MAX_INLINE_IMAGE_BYTES,
  MAX_INLINE_TEXT_BYTES,
  prettyJson,
} from "./artifacts";

describe("artifact views", () => {
  it("shows JSON and text inline, images as images, and offers the rest as downloads", () => {
    expect(artifactView("configs/run.json", 120)).toBe("json");
    expect(artifactView("step-1.TXT", 5)).toBe("text");
    expect(artifactView("train.yaml", 5)).toBe("text");
    expect(artifactView("plots/reward.png", 20_000)).toBe("image");
    expect(artifactView("diagram.svg", 300)).toBe("image");
    expect(artifactView("model.safetensors", 1_000)).toBe("download");
    expect(artifactView("Makefile", 10)).toBe("download");
    expect(artifactView(".json", 10)).toBe("download"); // a dot file, not an extension
  });

  it("does not pull large files into the page", () => {
    expect(artifactView("big.json", MAX_INLINE_TEXT_BYTES)).toBe("json");
    expect(artifactView("big.json", MAX_INLINE_TEXT_BYTES + 1)).toBe("download");
    expect(artifactView("huge.log", MAX_INLINE_TEXT_BYTES * 4)).toBe("download");
    expect(artifactView("huge.png", MAX_INLINE_IMAGE_BYTES + 1)).toBe("download");
  });

  it("pretty-prints JSON and keeps what does not parse", () => {
    expect(prettyJson('{"lr":0.1,"groups":[1,2]}')).toEqual({
      text: '{\n  "lr": 0.1,\n  "groups": [\n    1,\n    2\n  ]\n}',
      valid: true,
    });
    expect(prettyJson("{not json")).toEqual({ text: "{not json", valid: false });
  });

  it("splits a directory into breadcrumbs", () => {
    expect(breadcrumbs("")).toEqual([]);
    expect(breadcrumbs("a/b")).toEqual([
      { name: "a", path: "a" },
      { name: "b", path: "a/b" },
    ]);
  });

  it("formats sizes", () => {
    expect(formatBytes(null)).toBe("–");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KB");
    expect(formatBytes(3 * 1024 * 1024)).toBe("3.0 MB");
    expect(formatBytes(200 * 1024 * 1024)).toBe("200 MB");
  });
});
