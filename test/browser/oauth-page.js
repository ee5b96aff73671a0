import { getSelf, getUser } from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, platformSelf } from "@esri/arcgis-rest-request";

/**
 * The page of test/browser/oauth2.test.ts: an application that signs in with rest-js's
 * beginOAuth2 (PKCE, no popup) when opened with `?portal=...&client=...`, and completes the
 * sign-in when portico sends the browser back with a code (otherwise it does nothing). What it found is `window.result`.
 */
const redirectUri = `${location.origin}/`;
const query = new URLSearchParams(location.search);

async function run() {
  if (query.has("portal") && query.has("client")) {
    localStorage.setItem(
      "test-config",
      JSON.stringify({ portal: query.get("portal"), clientId: query.get("client") }),
    );
    await ArcGISIdentityManager.beginOAuth2({
      portal: query.get("portal"),
      clientId: query.get("client"),
      redirectUri,
      popup: false,
      pkce: true,
    });
    return;
  }
  if (!query.has("code") && !query.has("error")) return;
  const { portal, clientId } = JSON.parse(localStorage.getItem("test-config"));
  const session = await ArcGISIdentityManager.completeOAuth2({
    portal,
    clientId,
    redirectUri,
    popup: false,
    pkce: true,
  });
  const user = await getUser({ username: session.username, authentication: session });
  const self = await getSelf({ authentication: session });
  const fromCookie = await platformSelf(clientId, redirectUri, portal);
  window.result = {
    username: session.username,
    token: session.token,
    hasRefreshToken: typeof session.refreshToken === "string",
    user: user.username,
    self: self.user?.username,
    platformSelf: { username: fromCookie.username, tokenWorks: typeof fromCookie.token === "string" },
    url: location.href,
  };
}

run().catch((err) => {
  window.result = { error: String(err?.message ?? err) };
});
