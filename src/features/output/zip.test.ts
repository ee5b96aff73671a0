import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeZip, ZIP_PROGRESS_BYTES } from "./zip.js";

const run = promisify(execFile);

describe("zip writer", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-zip-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("calls progress before each entry and along a long one, and the archive reads back", async () => {
    const small = path.join(dir, "a.txt");
    fs.writeFileSync(small, "hello\n");
    const big = path.join(dir, "big.bin");
    fs.writeFileSync(big, Buffer.alloc(2 * ZIP_PROGRESS_BYTES + 1024, 7));
    let calls = 0;
    const target = path.join(dir, "out.zip");
    await writeZip(
      target,
      [
        { name: "a.txt", path: small },
        { name: "big.bin", path: big },
        { name: "b.txt", path: small },
      ],
      {
        progress: async () => {
          calls += 1;
        },
      },
    );
    // Before each of the three entries, and twice within the big one.
    expect(calls).toBe(5);
    const { stdout } = await run("unzip", ["-t", target]);
    expect(stdout).toMatch(/No errors detected/);
  });

  it("stops writing when progress throws", async () => {
    const file = path.join(dir, "a.txt");
    fs.writeFileSync(file, "hello\n");
    let calls = 0;
    const refused = await writeZip(
      path.join(dir, "out.zip"),
      [
        { name: "a.txt", path: file },
        { name: "b.txt", path: file },
      ],
      {
        progress: async () => {
          calls += 1;
          if (calls === 2) throw new Error("lease lost");
        },
      },
    ).catch((err: unknown) => err);
    expect((refused as Error).message).toBe("lease lost");
    expect(calls).toBe(2);
  });
});
