import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The feature folders of `src` build on one another in one direction: no folder may reach back,
 * through any chain of imports (type imports count too), to a folder that imports it. A unit is a
 * top-level folder, except the migrations (`db/migrations` and `db/migrate.ts`, which lists them):
 * they build tables with the helpers of the features they belong to, so they sit above every
 * feature while the rest of `db` sits below.
 * Files directly in `src` (the composition root, errors, ids) are outside the layers.
 */
const SRC = path.dirname(fileURLToPath(import.meta.url));

type Graph = Map<string, Map<string, string[]>>;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") ? [full] : [];
  });
}

/** The unit a file under `src` belongs to, or undefined for a file directly in `src`. */
function unitOf(relative: string): string | undefined {
  const parts = relative.split(path.sep);
  if (parts.length < 2) return undefined;
  if (parts[0] === "db" && (parts[1] === "migrate.ts" || (parts[1] === "migrations" && parts.length > 2))) {
    return "db/migrations";
  }
  return parts[0];
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"(\.{1,2}\/[^"]+)"|import\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g;

/** Edges between units: for each pair, the imports (`file -> file`) that make it. */
function unitGraph(): Graph {
  const graph: Graph = new Map();
  for (const file of sourceFiles(SRC)) {
    const from = unitOf(path.relative(SRC, file));
    if (from === undefined) continue;
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2];
      if (specifier === undefined) continue;
      const target = path.relative(SRC, path.resolve(path.dirname(file), specifier));
      const to = unitOf(target);
      if (to === undefined || to === from) continue;
      const edges = graph.get(from) ?? new Map<string, string[]>();
      graph.set(from, edges);
      const why = edges.get(to) ?? [];
      edges.set(to, why);
      why.push(`${path.relative(SRC, file)} -> ${target}`);
    }
  }
  return graph;
}

/** Strongly connected components of more than one unit (Tarjan), each sorted. */
function cyclesOf(edges: ReadonlyMap<string, Iterable<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node) as number);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) as number, index.get(next) as number));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of edges.keys()) if (!index.has(node)) visit(node);
  return found.sort((a, b) => a.join().localeCompare(b.join()));
}

/** The imports between the units of one cycle, for the failure message. */
function describeCycle(graph: Graph, units: string[]): string {
  const lines = [`cycle between ${units.join(", ")}:`];
  for (const from of units) {
    for (const [to, imports] of graph.get(from) ?? []) {
      if (units.includes(to)) lines.push(`  ${from} -> ${to}: ${imports.join("; ")}`);
    }
  }
  return lines.join("\n");
}

describe("feature folders", () => {
  it("finds a cycle through three units and none in a chain", () => {
    const ring = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a", "d"]],
      ["d", []],
    ]);
    expect(cyclesOf(ring)).toEqual([["a", "b", "c"]]);
    expect(
      cyclesOf(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", []],
        ]),
      ),
    ).toEqual([]);
  });

  it("places migrations in a unit of their own and files directly in src in none", () => {
    expect(unitOf(path.join("db", "migrations", "0001-initial.ts"))).toBe("db/migrations");
    expect(unitOf(path.join("db", "migrate.ts"))).toBe("db/migrations");
    expect(unitOf(path.join("db", "database.ts"))).toBe("db");
    expect(unitOf(path.join("features", "query", "answer.ts"))).toBe("features");
    expect(unitOf("services.ts")).toBeUndefined();
  });

  it("import each other in one direction only (no cycle between folders)", () => {
    const graph = unitGraph();
    const edges = new Map([...graph].map(([from, to]) => [from, [...to.keys()]]));
    expect(
      cyclesOf(edges)
        .map((c) => describeCycle(graph, c))
        .join("\n"),
    ).toBe("");
  });
});
