/** Plain-text output: aligned tables and number formats shared by the progress lines and summary. */

export type Verdict = "PASS" | "MISS";

export function verdict(ok: boolean): Verdict {
  return ok ? "PASS" : "MISS";
}

export function ms(value: number): string {
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;
}

export function seconds(value: number): string {
  return `${(value / 1000).toFixed(value < 1000 ? 3 : value < 10_000 ? 2 : 1)} s`;
}

export function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

export function rate(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

export function ratio(value: number): string {
  return `${value.toFixed(2)}x`;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * A table with a header row. The first `leftColumns` columns are text and align left; the rest are
 * figures and align right so that digits line up.
 */
export function table(header: string[], rows: string[][], leftColumns = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i < leftColumns ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [line(header), rule, ...rows.map(line)].join("\n");
}
