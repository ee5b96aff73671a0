import type { ParamSpec } from "../validation/params.js";

/**
 * Boxes in WGS 84 longitude and latitude: an item's `extent` and a search's `bbox`. Both arrive
 * as `xmin,ymin,xmax,ymax` (Esri's client joins an item's `[[xmin, ymin], [xmax, ymax]]` that
 * way); an extent may also come as that JSON array of two corners.
 */
export interface Box {
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
}

const NUMBER = /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;

/**
 * Parses a box; answers the reason it is refused. `wraps` admits an `xmin` greater than `xmax`
 * (a search box across the antimeridian); an item's extent never wraps.
 */
export function parseBox(raw: string, wraps: boolean): Box | string {
  let parts: string[];
  const text = raw.trim();
  if (text.startsWith("[")) {
    let corners: unknown;
    try {
      corners = JSON.parse(text);
    } catch {
      return "must be xmin,ymin,xmax,ymax or [[xmin,ymin],[xmax,ymax]]";
    }
    if (
      !Array.isArray(corners) ||
      corners.length !== 2 ||
      !corners.every((c) => Array.isArray(c) && c.length === 2 && c.every((v) => typeof v === "number"))
    ) {
      return "must be xmin,ymin,xmax,ymax or [[xmin,ymin],[xmax,ymax]]";
    }
    parts = (corners as number[][]).flat().map(String);
  } else {
    parts = text.split(",").map((s) => s.trim());
  }
  if (parts.length !== 4 || !parts.every((p) => NUMBER.test(p))) {
    return "must be four numbers: xmin,ymin,xmax,ymax (longitude and latitude in WGS 84)";
  }
  const [xmin, ymin, xmax, ymax] = parts.map(Number) as [number, number, number, number];
  if (![xmin, xmax].every((x) => x >= -180 && x <= 180)) return "must have longitudes from -180 to 180";
  if (![ymin, ymax].every((y) => y >= -90 && y <= 90)) return "must have latitudes from -90 to 90";
  if (ymin > ymax) return "must have ymin at most ymax";
  if (!wraps && xmin > xmax) return "must have xmin at most xmax";
  return { xmin, ymin, xmax, ymax };
}

/** A parameter that is a box (see `parseBox`). */
export function boxSpec(wraps: boolean): ParamSpec<Box, false> {
  return {
    kind: "string",
    required: false,
    parse(raw) {
      // Four numbers in either spelling fit in far less; a longer value is refused unread.
      if (raw.length > 256) return { ok: false, reason: "must be at most 256 characters" };
      const box = parseBox(raw, wraps);
      return typeof box === "string" ? { ok: false, reason: box } : { ok: true, value: box };
    },
  };
}

/** The ArcGIS item resource's `extent`: two corners, or an empty array when the item has none. */
export function extentJson(row: {
  extent_xmin: number | null;
  extent_ymin: number | null;
  extent_xmax: number | null;
  extent_ymax: number | null;
}): number[][] {
  const { extent_xmin: xmin, extent_ymin: ymin, extent_xmax: xmax, extent_ymax: ymax } = row;
  if (xmin === null || ymin === null || xmax === null || ymax === null) return [];
  return [
    [Number(xmin), Number(ymin)],
    [Number(xmax), Number(ymax)],
  ];
}

/** Most categories one item may have. */
export const MAX_ITEM_CATEGORIES = 20;
/** Longest category path, and deepest one (`/Categories/Water/Rivers` has three levels). */
export const MAX_CATEGORY_LENGTH = 256;
export const MAX_CATEGORY_LEVELS = 5;

/**
 * Checks one category path such as `/Categories/Water`: it starts with `/`, and has between one
 * and five non-empty levels. Answers the reason it is refused.
 */
export function categoryRefusal(path: string): string | undefined {
  if ([...path].length > MAX_CATEGORY_LENGTH) return `must be at most ${MAX_CATEGORY_LENGTH} characters`;
  if (!path.startsWith("/")) return "must be a category path starting with '/', such as /Categories/Water";
  const levels = path.slice(1).split("/");
  if (levels.some((level) => level.trim() === "")) return "must not have an empty level";
  if (levels.length > MAX_CATEGORY_LEVELS) return `must have at most ${MAX_CATEGORY_LEVELS} levels`;
  return undefined;
}

/** Category paths compare without case: the key the search and the counts use. */
export function categoryKey(path: string): string {
  return path.toLowerCase();
}
