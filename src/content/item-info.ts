import { errors } from "../errors.js";
import { imageType } from "./file-types.js";

/**
 * An item's info folder (`content/items/<id>/info/...`): the `iteminfo.xml` ArcGIS generates from
 * the item, and files owners upload with `updateinfo` (the item's metadata is
 * `info/metadata/metadata.xml`). ArcGIS takes only JSON, XML, CFG, TXT, PBF and PNG files there,
 * of up to 100 KB; so does portico.
 */

/** Largest file `updateinfo` takes. */
export const MAX_INFO_FILE_BYTES = 100 * 1024;
/** Files an item's info folder may hold (each upload of a new name adds one). */
export const MAX_INFO_FILES = 100;

/** The stored type of each extension `updateinfo` accepts. */
const INFO_TYPES: Readonly<Record<string, string>> = {
  json: "application/json",
  xml: "application/xml",
  cfg: "text/plain; charset=utf-8",
  txt: "text/plain; charset=utf-8",
  pbf: "application/x-protobuf",
  png: "image/png",
};

/** A file name in the info folder: letters, digits, `.`, `_`, `-`, not starting with a dot. */
const INFO_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;
/** A subfolder of the info folder. */
export const INFO_FOLDER = /^[A-Za-z0-9_-]{1,64}$/;

/** The generated file, answered at `info/iteminfo.xml`; no upload may take its name. */
export const ITEM_INFO_XML = "iteminfo.xml";

/** The item file kind of a file of the info folder. */
export function infoKind(folder: string | undefined, name: string): `info/${string}` {
  return `info/${folder ? `${folder}/` : ""}${name}`;
}

/**
 * Checks an uploaded info file (its name, folder, extension, and a PNG's bytes) and answers the
 * type it is stored with. Errors name the parameter.
 */
export function infoFileType(name: string, folder: string | undefined, head: Buffer): string {
  if (!INFO_NAME.test(name)) {
    throw errors.invalidParameter("file", "has a name that is not letters, digits, '.', '_' or '-'");
  }
  if (folder !== undefined && (!INFO_FOLDER.test(folder) || folder.toLowerCase() === "thumbnail")) {
    throw errors.invalidParameter(
      "folderName",
      "must be letters, digits, '_' or '-' and not 'thumbnail' (set the thumbnail with update)",
    );
  }
  if (folder === undefined && name.toLowerCase() === ITEM_INFO_XML) {
    throw errors.invalidParameter("file", "cannot be iteminfo.xml: that file is made from the item");
  }
  const extension = name.includes(".") ? (name.split(".").at(-1) ?? "").toLowerCase() : "";
  const type = INFO_TYPES[extension];
  if (!type) throw errors.invalidParameter("file", "must be a JSON, XML, CFG, TXT, PBF or PNG file");
  if (extension === "png" && imageType(head) !== "image/png") {
    throw errors.invalidParameter("file", "is named .png but is not a PNG image");
  }
  return type;
}

/** Text for an XML element: markup escaped, characters XML 1.0 cannot hold left out. */
function xmlText(value: string): string {
  return value
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");
}

/** What `iteminfo.xml` is made from: the item resource's fields. */
export interface ItemInfoSource {
  id: string;
  title: string;
  type: string;
  typeKeywords: readonly string[];
  description: string;
  snippet: string;
  tags: readonly string[];
  thumbnail: string | null;
  url: string | null;
  owner: string;
  created: number;
  modified: number;
}

/**
 * The item's `ESRI_ItemInformation` document, as ArcGIS generates `info/iteminfo.xml`: the item's
 * name, title, type, keywords, texts and tags. Every value is the item's own, escaped.
 */
export function itemInfoXml(item: ItemInfoSource): string {
  const el = (name: string, value: string | null) =>
    value === null || value === "" ? `  <${name}/>` : `  <${name}>${xmlText(value)}</${name}>`;
  const keywords = item.typeKeywords.map((k) => `    <typekeyword>${xmlText(k)}</typekeyword>`);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<ESRI_ItemInformation Culture="en-US">',
    el("name", item.title),
    el("guid", item.id),
    el("catalogpath", null),
    el("snippet", item.snippet),
    el("description", item.description),
    el("summary", item.snippet),
    el("title", item.title),
    el("tags", item.tags.join(",")),
    el("type", item.type),
    ...(keywords.length > 0 ? ["  <typekeywords>", ...keywords, "  </typekeywords>"] : ["  <typekeywords/>"]),
    el("thumbnail", item.thumbnail),
    el("documentation", null),
    el("url", item.url),
    el("owner", item.owner),
    el("created", String(item.created)),
    el("modified", String(item.modified)),
    "</ESRI_ItemInformation>",
    "",
  ].join("\n");
}
