import { expect } from "vitest";
import type { TestPortal } from "./portico.js";

/**
 * Every change of who may query a hosted layer, each made through `writer` after `reader` has
 * just answered the layer (so whatever `reader` keeps in memory about the service is warm), and
 * each checked on `reader` through `seen`: on one node the very next request must show it; across
 * nodes `seen` polls, since the change notification arrives asynchronously.
 *
 * The changes: sharing with a group and unsharing, a definition that stops allowing queries, a
 * member removed from and added to the group, a role that grants reading everything and its
 * withdrawal, sharing with the organization, the item's deletion, and a new service of the same
 * name. What each must answer follows from ArcGIS's rules alone (a hidden service answers 400 to
 * a signed-in caller; a layer without the Query capability refuses others with 403).
 */
export async function serviceAccessScenario(
  writer: TestPortal,
  reader: TestPortal,
  prefix: string,
  seen: (what: string, probe: () => Promise<boolean>) => Promise<void>,
): Promise<void> {
  const owner = await writer.addUser(`${prefix}_owner`, "org_publisher");
  const member = await writer.addUser(`${prefix}_member`, "org_user");
  const name = `${prefix}_layer`;
  const rest = writer.api.replace(/\/sharing\/rest$/, "/rest");
  const readerLayer = `${reader.api.replace(/\/sharing\/rest$/, "/rest")}/services/${name}/FeatureServer/0`;
  const admin = (op: string, params: Record<string, unknown>) =>
    writer.post(`${rest}/admin/services/${name}/FeatureServer/${op}`, params, owner.token);
  const createLayer = async (): Promise<string> => {
    const created = await writer.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name, capabilities: "Query" }, outputType: "featureService" },
      owner.token,
    );
    expect(created.success, JSON.stringify(created)).toBe(true);
    const added = await admin("addToDefinition", {
      addToDefinition: {
        layers: [{ name: "Points", geometryType: "esriGeometryPoint", spatialReference: { wkid: 4326 } }],
      },
    });
    expect(added.success, JSON.stringify(added)).toBe(true);
    return created.itemId as string;
  };
  /** The member's count query on the reader: the count, or the error code. */
  const memberQuery = async (): Promise<number | string> => {
    const r = await reader.get(`${readerLayer}/query`, { where: "1=1", returnCountOnly: true }, member.token);
    return r.error ? `error ${r.error.code}` : r.count;
  };
  const expectMember = async (what: string, answer: number | string) => {
    await seen(what, async () => (await memberQuery()) === answer);
    expect(await memberQuery(), what).toBe(answer);
  };
  const itemPath = (itemId: string, op: string) => `/content/users/${owner.username}/items/${itemId}/${op}`;

  let itemId = await createLayer();
  const group = (
    await writer.post("/community/createGroup", { title: `${prefix} group`, access: "org" }, owner.token)
  ).group.id as string;
  await writer.post(`/community/groups/${group}/addUsers`, { users: member.username }, owner.token);
  expect(await memberQuery()).toBe("error 400");

  await writer.post(itemPath(itemId, "share"), { groups: group }, owner.token);
  await expectMember("shared with the member's group", 0);

  await admin("updateDefinition", { updateDefinition: { capabilities: "Create,Editing" } });
  await expectMember("a definition without Query", "error 403");
  await admin("updateDefinition", { updateDefinition: { capabilities: "Query" } });
  await expectMember("Query allowed again", 0);

  await writer.post(`/community/groups/${group}/removeUsers`, { users: member.username }, owner.token);
  await expectMember("the member removed from the group", "error 400");
  await writer.post(`/community/groups/${group}/addUsers`, { users: member.username }, owner.token);
  await expectMember("the member added again", 0);

  await writer.post(itemPath(itemId, "unshare"), { groups: group }, owner.token);
  await expectMember("unshared from the group", "error 400");

  await writer.post(
    "/portals/self/updateUserRole",
    { user: member.username, role: "org_admin" },
    writer.adminToken,
  );
  await expectMember("the member made an administrator", 0);
  await writer.post(
    "/portals/self/updateUserRole",
    { user: member.username, role: "org_user" },
    writer.adminToken,
  );
  await expectMember("the member a user again", "error 400");

  await writer.post(itemPath(itemId, "share"), { org: true }, owner.token);
  await expectMember("shared with the organization", 0);

  await writer.post(itemPath(itemId, "delete"), {}, owner.token);
  await expectMember("the item deleted", "error 400");

  // A new service under the old name is a new item: private until shared.
  itemId = await createLayer();
  await expectMember("a private service of the same name", "error 400");
  await writer.post(itemPath(itemId, "share"), { org: true }, owner.token);
  await expectMember("the new service shared", 0);
}
