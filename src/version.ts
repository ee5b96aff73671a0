import fs from "node:fs";

/**
 * portico's own version, from package.json: one level above `src/` when run from source, two
 * above `dist/src/` when built, so it is searched for upwards.
 */
export const PORTICO_VERSION: string = (() => {
  let dir = new URL(".", import.meta.url);
  for (let i = 0; i < 4; i++) {
    const candidate = new URL("package.json", dir);
    if (fs.existsSync(candidate)) {
      const pkg = JSON.parse(fs.readFileSync(candidate, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "portico" && pkg.version) return pkg.version;
    }
    dir = new URL("..", dir);
  }
  return "unknown";
})();
