import { createHash } from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/**
 * The test page's script bundled with esbuild, made once and kept in test/browser/.cache until the
 * script, the SDK or esbuild changes.
 *
 * @arcgis/core is ES modules that import their dependencies by bare name, with subpaths only a
 * bundler resolves (calcite's component folders through `exports` patterns, CSS imported for
 * injection, `process.env.NODE_ENV`). An import map can stand in for a bundler, but the browser
 * then fetches and compiles about 900 modules one by one: on a 2-core machine that took 15 s
 * against 6 s for the bundle, and the MapView's start 8 s against 2 s.
 */

interface Esbuild {
  version: string;
  build(options: object): Promise<{ errors: unknown[] }>;
}

const OPTIONS = {
  bundle: true,
  // The SDK loads most of itself on demand (layer views, workers' clients, projection): each
  // dynamic import stays a chunk fetched when needed.
  splitting: true,
  format: "esm",
  minify: true,
  target: "es2022",
  define: { "process.env.NODE_ENV": '"production"' },
  // The only CSS imported from modules is calcite's, for widgets the page does not show.
  loader: { ".css": "empty" },
  logLevel: "error",
};

/** Builds (or finds) the bundle of `entry` and returns the folder holding `<entry name>.js` and its chunks. */
export async function bundled(dir: string, entry: string): Promise<string> {
  const require = createRequire(path.join(dir, "package.json"));
  const esbuild = require("esbuild") as Esbuild;
  const sdk = require("@arcgis/core/package.json").version as string;
  const key = createHash("sha256")
    .update(JSON.stringify({ sdk, esbuild: esbuild.version, OPTIONS }))
    .update(fs.readFileSync(path.join(dir, entry)))
    .digest("hex")
    .slice(0, 16);
  const cache = path.join(dir, ".cache");
  // Each entry keeps its own bundle: test files that bundle different pages run side by side.
  const name = path.basename(entry, path.extname(entry));
  const out = path.join(cache, `${name}-${key}`);
  if (fs.existsSync(path.join(out, entry))) return out;

  // Built beside and renamed into place, so that an interrupted build is never taken for a
  // finished one; older bundles go.
  const building = `${out}.${process.pid}.tmp`;
  const result = await esbuild.build({
    ...OPTIONS,
    entryPoints: [path.join(dir, entry)],
    outdir: building,
    absWorkingDir: dir,
  });
  if (result.errors.length > 0) throw new Error(`esbuild: ${JSON.stringify(result.errors)}`);
  for (const old of fs.readdirSync(cache)) {
    if (old.startsWith(`${name}-`) && old !== path.basename(building)) {
      fs.rmSync(path.join(cache, old), { recursive: true, force: true });
    }
  }
  fs.renameSync(building, out);
  return out;
}
