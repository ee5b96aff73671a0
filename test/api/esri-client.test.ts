import { getPortal, getSelf, getUser, updateUser } from "@esri/arcgis-rest-portal";
import {
  ArcGISAuthError,
  ArcGISIdentityManager,
  ArcGISRequestError,
  request,
} from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Esri's own client (@esri/arcgis-rest-request and -portal 4.10.2) against a running portico:
 * existing scripts must work unchanged.
 */
describe("Esri arcgis-rest-js client", () => {
  let portal: TestPortal;
  let session: ArcGISIdentityManager;
  beforeAll(async () => {
    portal = await startTestPortal({ env: { PORTICO_CONTEXT_PATH: "/portal" } });
    session = await ArcGISIdentityManager.signIn({
      username: ADMIN.username,
      password: ADMIN.password,
      portal: portal.api,
    });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("signs in with ArcGISIdentityManager.signIn under a context path and reads the user", async () => {
    expect(portal.api).toMatch(/\/portal\/sharing\/rest$/);
    expect(session.username).toBe(ADMIN.username);
    expect(session.token).toBeTypeOf("string");
    expect(session.tokenExpires.getTime()).toBeGreaterThan(Date.now());
    const user = await session.getUser();
    expect(user.role).toBe("org_admin");
  });

  it("reads the organization with getSelf and getPortal", async () => {
    const self = await getSelf({ authentication: session });
    expect(self.isPortal).toBe(true);
    expect(self.user?.username).toBe(ADMIN.username);
    const byId = await getPortal(self.id, { authentication: session });
    expect(byId.id).toBe(self.id);
    expect(byId.name).toBe(self.name);
  });

  it("updates the organization and a user's role through request()", async () => {
    const self = await getSelf({ authentication: session });
    const r = await request(`${portal.api}/portals/${self.id}/update`, {
      authentication: session,
      params: {
        name: "Esri Client Org",
        featuredGroups: [{ owner: ADMIN.username, title: "Featured" }],
        canSharePublic: false,
      },
    });
    expect(r).toEqual({ success: true, orgId: self.id });
    const after = await getSelf({ authentication: session });
    expect(after.name).toBe("Esri Client Org");
    expect(after.featuredGroups).toEqual([{ owner: ADMIN.username, title: "Featured" }]);
    expect(after.canSharePublic).toBe(false);

    const member = await portal.addUser("esri_member");
    const role = await request(`${portal.api}/portals/self/updateUserRole`, {
      authentication: session,
      params: { user: member.username, role: "org_publisher" },
    });
    expect(role).toEqual({ success: true });
    const user = await getUser({ username: member.username, authentication: session });
    expect(user.role).toBe("org_publisher");
  });

  it("updates the signed-in user's profile with updateUser", async () => {
    const r = await updateUser({
      user: { description: "Updated by arcgis-rest-js" },
      authentication: session,
    });
    expect(r.success).toBe(true);
    const user = await getUser({ username: ADMIN.username, authentication: session });
    expect(user.description).toBe("Updated by arcgis-rest-js");
  });

  it("surfaces validation errors as ArcGISRequestError with the parameter named", async () => {
    const failure = request(`${portal.api}/portals/self/update`, {
      authentication: session,
      params: { homePageFeaturedContentCount: 500 },
    });
    await expect(failure).rejects.toBeInstanceOf(ArcGISRequestError);
    await expect(failure).rejects.toMatchObject({ code: "PARAM_0002" });
    await expect(failure).rejects.toThrow(/homePageFeaturedContentCount/);
  });

  it("raises ArcGISAuthError for a revoked token, and a fresh sign-in works again", async () => {
    const other = await ArcGISIdentityManager.signIn({
      username: ADMIN.username,
      password: ADMIN.password,
      portal: portal.api,
    });
    await ArcGISIdentityManager.destroy(other);
    const failure = request(`${portal.api}/community/self`, { params: { token: other.token } });
    await expect(failure).rejects.toBeInstanceOf(ArcGISAuthError);
    await expect(failure).rejects.toMatchObject({ code: "GWM_0003" });
    const again = await ArcGISIdentityManager.signIn({
      username: ADMIN.username,
      password: ADMIN.password,
      portal: portal.api,
    });
    expect((await again.getUser()).username).toBe(ADMIN.username);
  });
});
