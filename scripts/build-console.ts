import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ALL_PRIVILEGES } from "../src/auth/privileges.js";
import { LOCKOUT_RULES, PASSWORD_RULES } from "../src/auth/security-policy.js";
import { ORG_SETTINGS, SETTING_NAMES } from "../src/portal/org-settings.js";

/**
 * Builds the administration console (console/) into dist/console: its page, one bundle of its
 * scripts (MapLibre loaded as a separate chunk, only for maps), its styles with MapLibre's, the
 * MapLibre worker, and meta.json, what the console learns of the API from the code itself: every
 * organization setting with its group and kind, the privileges a role can hold, the rules of the
 * security policy. `npm run build` runs it after tsc (from dist/scripts); tests call buildConsole().
 */

const ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir);
  return dir;
})();

/** The words an enum setting takes, read from the reason its spec gives for a wrong one. */
function choicesOf(spec: { kind: string; parse: (raw: string) => { ok: boolean; reason?: string } }) {
  if (spec.kind !== "string") return undefined;
  const answer = spec.parse("~");
  const reason = answer.ok ? undefined : answer.reason;
  const m = reason ? /^must be one of (.+)$/.exec(reason) : null;
  return m?.[1]?.split(", ");
}

export function consoleMeta() {
  return {
    settings: SETTING_NAMES.map((name) => {
      const def = ORG_SETTINGS[name] as (typeof ORG_SETTINGS)[typeof name] & { helperKey?: string };
      return {
        name,
        group: def.group,
        kind: def.spec.kind,
        ...(def.helperKey ? { helperKey: def.helperKey } : {}),
        ...(choicesOf(def.spec as never) ? { choices: choicesOf(def.spec as never) } : {}),
      };
    }),
    privileges: [...ALL_PRIVILEGES],
    passwordRules: [...PASSWORD_RULES],
    lockoutRules: [...LOCKOUT_RULES],
  };
}

export async function buildConsole(out = path.join(ROOT, "dist", "console")): Promise<string> {
  const require = createRequire(path.join(ROOT, "package.json"));
  const esbuild = (await import(require.resolve("esbuild"))) as typeof import("esbuild");
  const assets = path.join(out, "assets");
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(assets, { recursive: true });
  await esbuild.build({
    entryPoints: [path.join(ROOT, "console", "src", "main.ts")],
    bundle: true,
    splitting: true,
    format: "esm",
    target: "es2022",
    minify: true,
    sourcemap: false,
    outdir: assets,
    entryNames: "console",
    chunkNames: "chunk-[hash]",
    logLevel: "warning",
    legalComments: "linked",
  });
  const maplibre = path.dirname(require.resolve("maplibre-gl/dist/maplibre-gl.css"));
  fs.copyFileSync(path.join(maplibre, "maplibre-gl-worker.mjs"), path.join(assets, "maplibre-gl-worker.mjs"));
  fs.writeFileSync(
    path.join(assets, "console.css"),
    `${fs.readFileSync(path.join(ROOT, "console", "console.css"), "utf8")}\n${fs.readFileSync(path.join(maplibre, "maplibre-gl.css"), "utf8")}`,
  );
  fs.writeFileSync(path.join(assets, "meta.json"), JSON.stringify(consoleMeta()));
  fs.copyFileSync(path.join(ROOT, "console", "index.html"), path.join(out, "index.html"));
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const out = await buildConsole();
  process.stdout.write(`console built in ${path.relative(ROOT, out)}\n`);
}
