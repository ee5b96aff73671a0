import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../src/ids.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Whether an item, group, user or hosted service exists must not be observable by someone who may
 * not see it: the answer for another member's private one and for one that does not exist is the
 * same, byte for byte apart from the id or name in it. Anonymous callers are asked for a token
 * (499), signed-in callers hear "does not exist or is inaccessible" (400).
 */

let portal: TestPortal;
let owner: { username: string; token: string };
let member: { username: string; token: string };
let hermit: string;
let privateItem: string;
let privateGroup: string;
let privateService: string;

/** A 1x1 transparent PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

async function must(promise: Promise<any>, what: string): Promise<any> {
  const r = await promise;
  if (r?.error || r?.success === false) throw new Error(`${what}: ${JSON.stringify(r)}`);
  return r;
}

beforeAll(async () => {
  portal = await startTestPortal();
  [owner, member] = await Promise.all([
    portal.addUser("exist_owner", "org_publisher"),
    portal.addUser("exist_member", "org_user"),
  ]);
  const h = await portal.addUser("exist_hermit", "org_user");
  hermit = h.username;
  await must(portal.post(`/community/users/${hermit}/update`, { access: "private" }, h.token), "hermit");

  const body = new FormData();
  body.append("f", "json");
  body.append("token", owner.token);
  body.append("title", "Private item");
  body.append("type", "GeoJson");
  body.append("text", JSON.stringify({ type: "FeatureCollection", features: [] }));
  body.append("thumbnail", new Blob([PNG]), "thumb.png");
  const added = (await (
    await fetch(`${portal.api}/content/users/${owner.username}/addItem`, { method: "POST", body })
  ).json()) as any;
  if (!added.success) throw new Error(`addItem: ${JSON.stringify(added)}`);
  privateItem = added.id;

  privateGroup = (
    await must(
      portal.post("/community/createGroup", { title: "Private group", access: "private" }, owner.token),
      "group",
    )
  ).group.id;

  privateService = "private_svc";
  await must(
    portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name: privateService }, outputType: "featureService" },
      owner.token,
    ),
    "createService",
  );
  await must(
    portal.post(
      `${portal.portico.address}/rest/admin/services/${privateService}/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ name: "Points", geometryType: "esriGeometryPoint" }] } },
      owner.token,
    ),
    "addToDefinition",
  );
}, 60_000);

afterAll(async () => {
  await portal?.stop();
});

interface Probe {
  name: string;
  method: "GET" | "POST";
  /** The URL for an id or name. */
  url: (subject: string) => string;
  /** The private subject that exists. */
  existing: () => string;
  /** A subject of the same shape that does not exist. */
  missing: () => string;
}

const api = () => portal.api;
const server = () => `${portal.portico.address}/rest/services`;
const missingId = () => newId();

const PROBES: Probe[] = [
  {
    name: "items.get",
    method: "GET",
    url: (id) => `${api()}/content/items/${id}`,
    existing: () => privateItem,
    missing: missingId,
  },
  {
    name: "items.data",
    method: "GET",
    url: (id) => `${api()}/content/items/${id}/data`,
    existing: () => privateItem,
    missing: missingId,
  },
  {
    name: "items.thumbnail",
    method: "GET",
    url: (id) => `${api()}/content/items/${id}/info/thumbnail/thumb.png`,
    existing: () => privateItem,
    missing: missingId,
  },
  {
    name: "comments.list",
    method: "GET",
    url: (id) => `${api()}/content/items/${id}/comments`,
    existing: () => privateItem,
    missing: missingId,
  },
  {
    name: "items.update",
    method: "POST",
    url: (id) => `${api()}/content/users/${owner.username}/items/${id}/update`,
    existing: () => privateItem,
    missing: missingId,
  },
  {
    name: "items.share",
    method: "POST",
    url: (id) => `${api()}/content/users/${owner.username}/items/${id}/share`,
    existing: () => privateItem,
    missing: missingId,
  },
  {
    name: "groups.get",
    method: "GET",
    url: (id) => `${api()}/community/groups/${id}`,
    existing: () => privateGroup,
    missing: missingId,
  },
  {
    name: "groups.content",
    method: "GET",
    url: (id) => `${api()}/content/groups/${id}`,
    existing: () => privateGroup,
    missing: missingId,
  },
  {
    name: "groups.update",
    method: "POST",
    url: (id) => `${api()}/community/groups/${id}/update`,
    existing: () => privateGroup,
    missing: missingId,
  },
  {
    name: "users.get",
    method: "GET",
    url: (u) => `${api()}/community/users/${u}`,
    existing: () => hermit,
    missing: () => "exist_nobody",
  },
  {
    name: "featureServer.service",
    method: "GET",
    url: (n) => `${server()}/${n}/FeatureServer`,
    existing: () => privateService,
    missing: () => "missing_svc",
  },
  {
    name: "featureServer.layer",
    method: "GET",
    url: (n) => `${server()}/${n}/FeatureServer/0`,
    existing: () => privateService,
    missing: () => "missing_svc",
  },
];

/** Status, content type and body of an answer, with the subject replaced by a placeholder. */
async function answer(probe: Probe, subject: string, token: string | undefined): Promise<string> {
  const params = new URLSearchParams({ f: "json", ...(token ? { token } : {}) });
  const url = probe.url(subject);
  const res =
    probe.method === "GET"
      ? await fetch(`${url}?${params}`)
      : await fetch(url, { method: "POST", body: params });
  const text = (await res.text()).replaceAll(subject, "<subject>");
  return JSON.stringify({ status: res.status, type: res.headers.get("content-type"), text });
}

async function compare(who: "anonymous" | "member", code: number) {
  const token = who === "anonymous" ? undefined : member.token;
  const problems: string[] = [];
  for (const probe of PROBES) {
    // Anonymous callers of a route that always needs a token get 499 before any lookup; these
    // probes still show that a write answers alike for both.
    const existing = await answer(probe, probe.existing(), token);
    const missing = await answer(probe, probe.missing(), token);
    if (existing !== missing)
      problems.push(`${probe.name} as ${who}: ${existing} but ${missing} when missing`);
    const error = JSON.parse(JSON.parse(existing).text).error;
    if (error?.code !== code) problems.push(`${probe.name} as ${who}: expected ${code}, got ${existing}`);
  }
  expect(problems).toEqual([]);
}

describe.each(["private", "public"] as const)("in a %s organization", (access) => {
  beforeAll(async () => {
    await must(portal.post("/portals/self/update", { access }, portal.adminToken), "org access");
  });

  it("anonymous callers get the same 499 for a private and a missing item, group, user or service", async () => {
    await compare("anonymous", 499);
  });

  it("signed-in members get the same 400 for another member's private and a missing one", async () => {
    await compare("member", 400);
  });
});
