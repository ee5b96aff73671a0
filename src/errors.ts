/**
 * Typed errors. Domain code throws these through the named factories below; the HTTP layer maps
 * them once to the ArcGIS error envelope (`wire.md` §2): HTTP 200 with
 * `{"error": {"code", "messageCode", "message", "details"}}`.
 */
export type ErrorCode = 400 | 403 | 498 | 499 | 500;

export class PorticoError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly messageCode?: string,
    readonly details: string[] = [],
  ) {
    super(message);
    this.name = "PorticoError";
  }
}

const NO_PERMISSION = "You do not have permissions to access this resource or perform this operation.";

export const errors = {
  invalidToken: () => new PorticoError(498, "Invalid token.", "GWM_0003", []),
  tokenRequired: () => new PorticoError(499, "Token Required.", "GWM_0002", []),
  forbidden: (detail?: string) => new PorticoError(403, NO_PERMISSION, "GWM_0004", detail ? [detail] : []),
  sslRequired: () =>
    new PorticoError(403, "SSL Required", "GWM_0005", [
      "This organization accepts only HTTPS requests (allSSL is true).",
    ]),

  /** A required parameter is absent or empty. */
  missingParameter: (name: string) =>
    new PorticoError(400, `Missing required parameter '${name}'.`, "PARAM_0001", [`'${name}' is required.`]),
  /** A parameter is present but its value is wrong; `reason` says why, in a full sentence fragment. */
  invalidParameter: (name: string, reason: string) =>
    new PorticoError(400, `Invalid value for parameter '${name}': ${reason}.`, "PARAM_0002", [
      `'${name}' ${reason}.`,
    ]),
  unsupportedFormat: (f: string) =>
    new PorticoError(
      400,
      `Invalid value for parameter 'f': '${f}' is not a supported format.`,
      "PARAM_0003",
      ["'f' must be one of json, pjson, pjsonm, html."],
    ),

  notFound: (what: string) => new PorticoError(400, "Not found.", "GWM_0404", [`${what} does not exist.`]),
  organizationNotFound: (id: string) =>
    new PorticoError(400, `Organization '${id}' does not exist or is inaccessible.`, "ORG_0001", [
      "Use the organization id or 'self'.",
    ]),
  userNotFound: (username: string) =>
    new PorticoError(400, `User '${username}' does not exist or is inaccessible.`, "COM_0003", []),
  itemNotFound: (id: string) =>
    new PorticoError(400, "Item does not exist or is inaccessible.", "CONT_0001", [`Item '${id}'.`]),
  groupNotFound: (id: string) =>
    new PorticoError(400, "Group does not exist or is inaccessible.", "COM_0036", [`Group '${id}'.`]),
  roleNotFound: (id: string) =>
    new PorticoError(400, `Role '${id}' does not exist or is inaccessible.`, "ORG_0020", []),
  webhookNotFound: (id: string) =>
    new PorticoError(400, "Webhook does not exist or is inaccessible.", "WEBHOOK_0001", [`Webhook '${id}'.`]),

  collaborationNotFound: (id: string) =>
    new PorticoError(400, "Collaboration does not exist or is inaccessible.", "COLLAB_0404", [
      `Collaboration '${id}'.`,
    ]),
  workspaceNotFound: (id: string) =>
    new PorticoError(400, "Collaboration workspace does not exist or is inaccessible.", "COLLAB_0405", [
      `Workspace '${id}'.`,
    ]),

  usernameTaken: (username: string) =>
    new PorticoError(400, `A user named '${username}' already exists.`, "COM_0010", [
      "'username' must be unique in the organization.",
    ]),
  roleNameTaken: (name: string) =>
    new PorticoError(400, `A role named '${name}' already exists.`, "ORG_0021", [
      "'name' must be unique among the organization's roles.",
    ]),
  roleInUse: (id: string, count: number) =>
    new PorticoError(400, `Role '${id}' is assigned to ${count} user(s) and cannot be deleted.`, "ORG_0022", [
      "Assign those users another role first.",
    ]),
  lastAdministrator: (action: string) =>
    new PorticoError(
      400,
      `Cannot ${action}: the organization must keep at least one enabled administrator.`,
      "ORG_0030",
      [],
    ),
  conflict: (message: string, detail?: string) =>
    new PorticoError(400, message, "GEN_0002", detail ? [detail] : []),

  badCredentials: () =>
    new PorticoError(400, "Unable to generate token.", "GWM_0007", ["Invalid username or password."]),
  accountDisabled: () =>
    new PorticoError(400, "Unable to generate token.", "GWM_0008", ["This account has been disabled."]),

  internal: () => new PorticoError(500, "An internal error occurred.", "GEN_0500", []),

  serviceNameTaken: (existing: string) =>
    new PorticoError(400, `Service name '${existing}' already exists.`, "SVC_0001", [
      "'name' of createParameters must be unique in the organization, regardless of case.",
    ]),
  serviceNotFound: (name: string) =>
    new PorticoError(400, "Service does not exist or is inaccessible.", "SVC_0002", [
      `Service '${name}/FeatureServer'.`,
    ]),
  layerNotFound: (service: string, id: string) =>
    new PorticoError(400, `Layer or table '${id}' does not exist in service '${service}'.`, "SVC_0003", []),
  groupTitleTaken: (title: string) =>
    new PorticoError(400, `A group named '${title}' already exists.`, "COM_0040", [
      "'title' must be unique among the organization's groups, regardless of case.",
    ]),
} as const;
