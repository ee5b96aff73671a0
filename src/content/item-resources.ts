import { errors } from "../errors.js";
import { imageType } from "./file-types.js";

/**
 * Item resources (`addResources`, `content/items/<id>/resources/<path>`): files an item keeps
 * beside its data, in folders. ArcGIS takes files of up to 50 MB and 1,000 per item; so does
 * portico. Their paths are checked here, before anything is stored: a path is a key, never a
 * place on a disk, but it is also part of a URL, so it is kept to characters every client sends
 * unchanged.
 */

/** Largest resource file (ArcGIS: "each file should be no more than 50 Mb"). */
export const MAX_RESOURCE_BYTES = 50 * 1024 * 1024;
/** Resources an item may hold (ArcGIS's limit, Style items aside). */
export const MAX_RESOURCES_PER_ITEM = 1000;
/** Folders a resource may be in, one inside the other (`a/b/c/file.json`). */
export const MAX_RESOURCE_FOLDERS = 4;
/** Longest resource path, folders and name. */
export const MAX_RESOURCE_PATH = 255;

/**
 * One segment of a path: letters, digits, `.`, `_`, `-`, `(`, `)` and spaces inside, never
 * starting with a dot (so neither `.` nor `..`, nor hidden names).
 */
const SEGMENT = /^[A-Za-z0-9_()-](?:[A-Za-z0-9._() -]{0,126}[A-Za-z0-9._()-])?$/;

/** The item file kind of a resource. */
export function resourceKind(path: string): `resources/${string}` {
  return `resources/${path}`;
}

/** The resource path of an item file kind made by `resourceKind`. */
export function resourcePathOf(kind: string): string {
  return kind.slice("resources/".length);
}

/**
 * A resource path from its folder (`resourcesPrefix`, which may itself hold folders) and its
 * name, checked: relative, at most `MAX_RESOURCE_FOLDERS` folders deep, every segment as
 * `SEGMENT` says. Errors name `parameter`.
 */
export function resourcePath(parameter: string, prefix: string | undefined, name: string): string {
  const folders = prefix ? prefix.replace(/^\/+|\/+$/g, "") : "";
  const path = folders ? `${folders}/${name}` : name;
  checkResourcePath(parameter, path);
  return path;
}

/** Checks a whole resource path (`folder/name`), as `resourcePath` does. */
export function checkResourcePath(parameter: string, path: string): void {
  if (path.length === 0) throw errors.invalidParameter(parameter, "must name a resource");
  if (path.length > MAX_RESOURCE_PATH) {
    throw errors.invalidParameter(parameter, `must be a path of at most ${MAX_RESOURCE_PATH} characters`);
  }
  const segments = path.split("/");
  if (segments.length - 1 > MAX_RESOURCE_FOLDERS) {
    throw errors.invalidParameter(parameter, `must be at most ${MAX_RESOURCE_FOLDERS} folders deep`);
  }
  for (const segment of segments) {
    if (!SEGMENT.test(segment)) {
      throw errors.invalidParameter(
        parameter,
        `has '${segment.slice(0, 64)}': folders and names are letters, digits, spaces, '.', '_', '-', '(' or ')', not starting with '.'`,
      );
    }
  }
}

/** Types of resources by extension; anything else is stored as `application/octet-stream`. */
const RESOURCE_TYPES: Readonly<Record<string, string>> = {
  json: "application/json",
  txt: "text/plain; charset=utf-8",
  xml: "application/xml",
  pbf: "application/x-protobuf",
  zip: "application/zip",
  gz: "application/gzip",
  csv: "text/csv",
  pdf: "application/pdf",
  svg: "image/svg+xml",
  bmp: "image/bmp",
};

/** Image extensions: stored as an image only when the bytes are one (`imageType`). */
const IMAGE_EXTENSIONS = new Set(["png", "jpg", "jpeg", "gif"]);

/**
 * The type a resource is stored with, from its name's extension; images only when their first
 * bytes say so. Whatever it is, it is answered as file-types.ts says (an SVG as a download).
 */
export function resourceType(name: string, head: Buffer): string {
  const extension = name.includes(".") ? (name.split(".").at(-1) ?? "").toLowerCase() : "";
  if (IMAGE_EXTENSIONS.has(extension)) return imageType(head) ?? "application/octet-stream";
  return RESOURCE_TYPES[extension] ?? "application/octet-stream";
}
