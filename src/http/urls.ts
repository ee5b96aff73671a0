/**
 * Public addresses derived from the API root (`HandlerContext.apiBase`, e.g.
 * `https://gis.example.com/portal/sharing/rest`), written once: answers, tokens and the hosted
 * services must agree on them.
 */

/** The portal's public base without `/sharing/rest`: what ArcGIS calls the owning system. */
export function owningSystemUrl(apiBase: string): string {
  return apiBase.replace(/\/sharing\/rest$/, "");
}

/** Where the hosted services live: the `server` root (`/rest/services`), beside `/sharing/rest`. */
export function servicesBase(apiBase: string): string {
  return `${owningSystemUrl(apiBase)}/rest/services`;
}

/** The last answer of `portalHostname`, and what it was asked. */
const hostnameOf = { apiBase: "", hostname: "" };

/** The portal's host and path as `portals/self` names it (`portalHostname`), e.g. `gis.example.com/portal`. */
export function portalHostname(apiBase: string): string {
  // Asked on every `portals/self`, always with the same base: parsed once, not per request.
  if (apiBase !== hostnameOf.apiBase) {
    const base = new URL(owningSystemUrl(apiBase));
    hostnameOf.apiBase = apiBase;
    hostnameOf.hostname = `${base.host}${base.pathname.replace(/\/$/, "")}`;
  }
  return hostnameOf.hostname;
}
