/**
 * Typed errors. Domain code throws these through the named factories below; the HTTP layer maps
 * them once to the ArcGIS error envelope (`wire.md` §2): HTTP 200 with
 * `{"error": {"code", "messageCode", "message", "details"}}`.
 */
export type ErrorCode = 400 | 403 | 498 | 499 | 500;

/** The error names of RFC 6749 (§4.1.2.1, §5.2) that the OAuth 2.0 endpoints answer. */
export type OAuthErrorName =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "unsupported_response_type"
  | "invalid_scope";

export class PorticoError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly messageCode?: string,
    readonly details: string[] = [],
    /**
     * An OAuth 2.0 endpoint's refusal: its RFC 6749 name, answered as `error` (with the message as
     * `error_description`) beside ArcGIS's fields, as ArcGIS answers its own OAuth errors.
     */
    readonly oauthError?: OAuthErrorName,
  ) {
    super(message);
    this.name = "PorticoError";
  }
}

/** A byte count as people read it in an error: `1 MB`, `64 KB`, `1500 bytes`. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KB`;
  return `${bytes} bytes`;
}

const NO_PERMISSION = "You do not have permissions to access this resource or perform this operation.";

/** What a host answers a guest it no longer counts (removed, left, collaboration deleted). */
export const PARTICIPATION_ENDED = "COLLAB_0410";
/** A peer refused the call (unknown sender, bad signature, stale or replayed envelope). */
export const CALL_REFUSED = "COLLAB_0498";

export const errors = {
  invalidToken: () => new PorticoError(498, "Invalid token.", "GWM_0003", []),
  tokenRequired: () => new PorticoError(499, "Token Required.", "GWM_0002", []),
  forbidden: (detail?: string) => new PorticoError(403, NO_PERMISSION, "GWM_0004", detail ? [detail] : []),
  /**
   * A form of the API directory posted with its sign-in cookie but without the form's CSRF value
   * (or with another one): not sent from the directory's own page.
   */
  directoryFormRefused: () =>
    new PorticoError(403, NO_PERMISSION, "GWM_0004", [
      "The form was not sent from this portal's directory page, or the sign-in it was made for ended. Open the form again.",
    ]),
  sslRequired: () =>
    new PorticoError(403, "SSL Required", "GWM_0005", [
      "This organization accepts only HTTPS requests (allSSL is true).",
    ]),

  /** A required parameter is absent or empty; `detail` says how to send it when there is more than one way. */
  missingParameter: (name: string, detail = `'${name}' is required.`) =>
    new PorticoError(400, `Missing required parameter '${name}'.`, "PARAM_0001", [detail]),
  /**
   * Several parameter errors found at once, as one error: the first one's code and message, every
   * one's details (what the public API answers for a request with more than one bad value).
   */
  parameterProblems: (problems: readonly PorticoError[]) => {
    const first = problems[0];
    if (!first) throw new Error("parameterProblems needs at least one problem");
    return new PorticoError(
      first.code,
      first.message,
      first.messageCode,
      problems.flatMap((e) => e.details),
    );
  },
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

  /**
   * A peer call from an unknown collaboration or participant, or with a bad signature: one answer
   * for all, so that the unauthenticated peer endpoint does not tell which collaborations exist.
   */
  peerCallRefused: () =>
    new PorticoError(
      498,
      "Peer call refused: no such participant is known here, or the signature does not match its key.",
      CALL_REFUSED,
      [],
    ),
  /** More query, form, JSON or multipart parameters than any operation takes. */
  tooManyParameters: (max: number) =>
    new PorticoError(400, `Too many parameters: a request may carry at most ${max}.`, "PARAM_0004", [
      `Send at most ${max} parameters.`,
    ]),
  /** The body (or, in a multipart request, its parameters besides the files) is over the operation's limit. */
  bodyTooLarge: (limit: number, what = "The request body") =>
    new PorticoError(
      400,
      `${what} is larger than this operation accepts (${formatBytes(limit)}).`,
      "GEN_0413",
      [`This operation accepts at most ${limit} bytes.`],
    ),
  /** An uploaded file is over the cap of its field. */
  fileTooLarge: (field: string, maxBytes: number) =>
    new PorticoError(
      400,
      `Invalid value for parameter '${field}': the file is larger than ${formatBytes(maxBytes)}.`,
      "PARAM_0005",
      [`'${field}' accepts files of at most ${maxBytes} bytes.`],
    ),
  /** A multipart body sent to an operation that takes no file. */
  filesNotAccepted: () =>
    new PorticoError(400, "Unable to process the request.", "GEN_0415", [
      "This operation takes no files: send its parameters as application/x-www-form-urlencoded or in the query string, not as multipart/form-data.",
    ]),
  /**
   * Bodies (or uploaded files) of callers not yet known (no token in a header or the query string)
   * use more than the process, or one sender, may hold at once (`PORTICO_PREAUTH_BODY_BUDGET_MB`,
   * `PORTICO_PREAUTH_UPLOAD_BUDGET_MB`): nothing was processed.
   */
  preAuthBudgetSpent: () =>
    new PorticoError(
      400,
      "Too many requests from callers not yet authenticated are being received. Try again in a moment.",
      "GEN_0429",
      [
        "Send the token in the X-Esri-Authorization or Authorization header (Bearer) or in the query string, so that the caller is known before the body is read and this limit does not apply.",
      ],
    ),
  /** A sender's notifications of this hour would pass its quota (one per recipient): nothing was sent. */
  notificationQuotaSpent: (max: number, resetsAt: number) =>
    new PorticoError(400, "Too many notifications sent. Try again later.", "GEN_0429", [
      `A user may send at most ${max} notifications (one per recipient) an hour; this would pass it. Send again after ${new Date(resetsAt).toISOString()}.`,
    ]),
  /**
   * A body of a caller not yet known that stopped arriving (fewer than `minBytes` in `windowMs`):
   * refused well before the request timeout, so that no one holds the budget by sending nothing.
   */
  bodyTooSlow: (minBytes: number, windowMs: number) =>
    new PorticoError(400, "The request body is arriving too slowly.", "GEN_0408", [
      `A request whose caller is not yet known must send at least ${formatBytes(minBytes)} of its body every ${windowMs / 1000} seconds. Send the token in the X-Esri-Authorization or Authorization header (Bearer) or in the query string, so that the caller is known before the body is read and this limit does not apply.`,
    ]),
  /** A body that cannot be read: broken multipart, JSON beyond the member limit, an aborted upload. */
  badBody: (reason: string) => new PorticoError(400, "Unable to process the request.", "GEN_0400", [reason]),
  /** No route at that address, or an address the router cannot read; `detail` says which. */
  invalidUrl: (detail: string) => new PorticoError(400, "Invalid URL", "GEN_0404", [detail]),

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

  /**
   * An OAuth 2.0 request refused (`oauth2/token`, `authorize`, `exchangeToken`, `platformSelf`):
   * `error` is the RFC 6749 error name, answered as `error` and, for clients that read only
   * ArcGIS's fields, in the details.
   */
  oauth: (error: OAuthErrorName, description: string) =>
    new PorticoError(400, description, "OAUTH_0001", [error], error),
  /**
   * A parameter error (missing, invalid) of an OAuth 2.0 endpoint: the same error, also named
   * `invalid_request` as RFC 6749 §5.2 calls it. Other errors pass unchanged.
   */
  asOAuthRequestError: (err: PorticoError) =>
    err.oauthError === undefined && err.code === 400 && err.messageCode?.startsWith("PARAM_")
      ? new PorticoError(err.code, err.message, err.messageCode, err.details, "invalid_request")
      : err,
  badCredentials: () =>
    new PorticoError(400, "Unable to generate token.", "GWM_0007", ["Invalid username or password."]),
  accountDisabled: () =>
    new PorticoError(400, "Unable to generate token.", "GWM_0008", ["This account has been disabled."]),
  /**
   * Too many consecutive failed sign-ins. Answered the same for a name no account has (failures
   * are counted by name), so the answer does not tell which usernames exist.
   */
  accountLocked: (minutes: number) =>
    new PorticoError(400, "Unable to generate token.", "GWM_0009", [
      `Too many invalid sign-in attempts: sign-in for this username is locked. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}, or ask an administrator to unlock the account.`,
    ]),
  passwordExpired: () =>
    new PorticoError(400, "Unable to generate token.", "GWM_0010", [
      "The password has expired and must be changed: sign in again with the current password and a new one in 'newPassword'.",
    ]),
  /** The password hashing queue is full (many sign-ins at once): nothing was checked. */
  signInBusy: () =>
    new PorticoError(
      400,
      "Too many sign-in attempts are being processed. Try again in a moment.",
      "GWM_0011",
      ["The server limits how many passwords it checks at once; this request was not processed."],
    ),
  passwordReused: (param: string, historySize: number) =>
    new PorticoError(400, `Invalid value for parameter '${param}': it was used recently.`, "PARAM_0002", [
      `'${param}' must differ from the last ${historySize} password${historySize === 1 ? "" : "s"} of the account (historySize).`,
    ]),

  /** A search ran past `PORTICO_SEARCH_TIMEOUT_MS` and was stopped. */
  searchTimedOut: (timeoutMs: number) =>
    new PorticoError(400, `The search took longer than ${timeoutMs} ms and was stopped.`, "SEARCH_0001", [
      "Narrow 'q' (fewer words, fewer or longer prefixes) and try again.",
    ]),

  internal: () => new PorticoError(500, "An internal error occurred.", "GEN_0500", []),
  /**
   * The database could not be reached, or the connection broke during the request (a restart, a
   * failover). A change whose commit was cut off may or may not have been made.
   */
  databaseUnavailable: () =>
    new PorticoError(500, "The portal's database is unavailable.", "GEN_0503", [
      "The database could not be reached or the connection to it was lost. Try again shortly.",
    ]),

  /** Every connection of the node's PostgreSQL pool stayed busy while the request waited for one. */
  databaseBusy: () =>
    new PorticoError(500, "The portal is busy.", "GEN_0503", [
      "Every connection to the database was in use for too long. Try again shortly.",
    ]),

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
  /** An attachment operation on a layer whose definition does not say `hasAttachments: true`. */
  attachmentsNotSupported: (service: string, layerId: number) =>
    new PorticoError(400, "This layer does not support attachments.", "SVC_0004", [
      `Layer ${layerId} of service '${service}' has no attachments: its definition does not say hasAttachments: true.`,
    ]),
  /** A signed collaboration file (invitation or response) that does not check out. */
  collaborationFileRefused: (param: string, reason: string) =>
    new PorticoError(400, `The file in '${param}' was refused: ${reason}.`, "COLLAB_0001", [
      `'${param}': ${reason}.`,
    ]),
  /** An operation meant for the other side of a collaboration (the host's on a guest, or back). */
  collaborationWrongSide: (message: string, role: string) =>
    new PorticoError(400, message, "COLLAB_0002", [`This portal is the collaboration's ${role}.`]),
  syncsStartedByGuests: () =>
    new PorticoError(400, "Syncs of this collaboration are started by its guests.", "COLLAB_0003", [
      "The guest is the participant designated to initiate syncs; sync from the guest portal.",
    ]),
  schedulesKeptByGuests: () =>
    new PorticoError(400, "Sync schedules are kept by the collaboration's guests.", "COLLAB_0004", [
      "Schedule syncs on the guest portal.",
    ]),
  syncAlreadyRunning: (syncId: string, status: string, since: number) =>
    new PorticoError(
      400,
      `A sync of this workspace is already running (syncId ${syncId}, ${status} since ${new Date(since).toISOString()}); a new sync was not started.`,
      "COLLAB_0010",
      [`Wait for sync ${syncId} to finish; follow it at syncStatus/${syncId}.`],
    ),
  hostGroupNotLinked: () =>
    new PorticoError(400, "The host has no group linked to this workspace.", "COLLAB_0011", [
      "The host's administrator links one with updatePortalGroupLink.",
    ]),
  /** A peer asked for what the workspace's access modes do not allow (`what`: send to, receive from). */
  accessModeRefused: (what: string) =>
    new PorticoError(
      403,
      `The workspace's access modes do not let this participant ${what} the host.`,
      "COLLAB_0012",
      [],
    ),
  /** A notice to a guest from a participant that is not the collaboration's host. */
  noticeNotFromHost: () =>
    new PorticoError(403, "Only the host sends notices to a guest.", "COLLAB_0403", []),
  /** A former guest calls its host: what lets a guest whose removal notice was lost learn it. */
  participationEnded: () =>
    new PorticoError(
      403,
      "The caller is no longer a participant of that collaboration.",
      PARTICIPATION_ENDED,
      ["It was removed by the host, or it left."],
    ),
  /** A peer call refused for a reason safe to tell (an expired or replayed envelope, …). */
  peerCallRefusedBecause: (reason: string) =>
    new PorticoError(498, `Peer call refused: ${reason}.`, CALL_REFUSED, []),
  groupTitleTaken: (title: string) =>
    new PorticoError(400, `A group named '${title}' already exists.`, "COM_0040", [
      "'title' must be unique among the organization's groups, regardless of case.",
    ]),
} as const;
