import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as featureService from "@esri/arcgis-rest-feature-service";
import * as portal from "@esri/arcgis-rest-portal";
import * as restRequest from "@esri/arcgis-rest-request";
import { describe, expect, it } from "vitest";

/**
 * Every function of Esri's client (`@esri/arcgis-rest-request`, `-portal` and `-feature-service`
 * 4.10.2) that talks to a portal must be called, with its documented result checked, by some test
 * under `test/` (issue 15). This file keeps that true: it fails when a function is neither called by
 * a test nor listed below with the reason it makes no request of a portal, so a function a new
 * client version adds is noticed.
 */

/** Functions that make no request of their own: URL and parameter helpers, client settings. */
const NO_REQUEST = new Set([
  "appendCustomParams",
  "bboxToString",
  "canUseOnlineToken",
  "checkForErrors",
  "cleanUrl",
  "decodeParam",
  "decodeQueryString",
  "decorateThumbnail",
  "determineOwner",
  "determineUsername",
  "encodeFormData",
  "encodeParam",
  "encodeQueryString",
  "ensureMembership",
  "getDefaultRequestOptions",
  "getFetch",
  "getItemBaseUrl",
  "getOnlineEnvironment",
  "getPortalUrl",
  "getRegisteredNoCorsDomains",
  "getSharingUrl",
  "getUserUrl",
  // What `request` calls; every request-making function goes through it.
  "internalRequest",
  "isBBox",
  "isFederated",
  "isItemOwner",
  "isNoCorsDomain",
  "isNoCorsRequestRequired",
  "isOnline",
  "normalizeOnlinePortalUrl",
  "parseServiceUrl",
  "processParams",
  "registerNoCorsDomains",
  "requiresFormData",
  "scrubControlChars",
  "setDefaultRequestOptions",
  "warn",
  "withOptions",
]);

/** Functions of ArcGIS Online that a self-hosted portal has no equivalent of. */
const NO_PORTAL_EQUIVALENT = new Set([
  // Fetches a resource of a server that sends no CORS headers through ArcGIS Online's no-cors
  // domain list; portico sends CORS headers (`allowedOrigins`).
  "sendNoCorsRequest",
]);

const TEST_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const THIS_FILE = fileURLToPath(import.meta.url);

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : testFiles(full);
    return entry.name.endsWith(".test.ts") && full !== THIS_FILE ? [full] : [];
  });
}

/** The client's exported functions (classes such as `ArcGISIdentityManager` are left out). */
const clientFunctions = [restRequest, portal, featureService].flatMap((module) =>
  Object.entries(module)
    .filter(([name, value]) => typeof value === "function" && /^[a-z]/.test(name))
    .map(([name]) => name),
);

/** Whether some test calls `name` (a call, not a mention in a comment or a string). */
function calledByATest(name: string, sources: readonly string[]): boolean {
  const call = new RegExp(`(?<![\\w.'"\`])${name}\\s*\\(`);
  return sources.some((source) => call.test(source.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, "")));
}

describe("Esri's client functions", () => {
  const sources = testFiles(TEST_ROOT).map((file) => readFileSync(file, "utf8"));

  it("are each called by a test, or listed with the reason they are not", () => {
    const missing = clientFunctions.filter(
      (name) => !NO_REQUEST.has(name) && !NO_PORTAL_EQUIVALENT.has(name) && !calledByATest(name, sources),
    );
    expect(missing, "call these from a test of test/api (Esri's client against portico)").toEqual([]);
  });

  it("listed here all exist in the client", () => {
    const known = new Set(clientFunctions);
    const lists = [...NO_REQUEST, ...NO_PORTAL_EQUIVALENT];
    expect(lists.filter((name) => !known.has(name))).toEqual([]);
  });
});
