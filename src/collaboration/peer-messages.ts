import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { imageType } from "../content/file-types.js";
import { checkTypedValue, contentTypeSpec, fileNameSpec, itemSpecs } from "../content/item-specs.js";
import type { WorkspaceConfig } from "./collaboration-types.js";
import { LAYER_COPY_ANSWERS, LAYER_COPY_REQUESTS } from "./layer-copy-messages.js";
import type { ItemPackage, ItemResult } from "./replication.js";

/**
 * What another portal may send: the shapes of peer call bodies and answers, and the checks every
 * received item passes before anything of it is stored. A peer signs with a key this portal
 * trusts, but that proves only who sent a message, not that it is sound: a guest's `apply` and a
 * host's `export` answer are checked here as strictly as a member's `addItem`, with the same item
 * specs (`content/item-specs.ts`), sizes measured on the bytes received, and the receiver's own
 * batch limits. A malformed message fails the call; a bad item fails alone, with its reason.
 */

/** Items per peer call, and bytes of item data per call (a single larger item travels alone). */
export const BATCH_ITEMS = 100;
export const BATCH_BYTES = 16 * 1024 * 1024;
export const MB = 1024 * 1024;
/**
 * Largest item data a sync moves: items travel base64-encoded in JSON, and a request may be at
 * most 110 MB (the server's body limit), so larger items are reported failed rather than sent.
 */
export const MAX_TRANSPORT_BYTES = 64 * MB;

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });

const ID = { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" };
const WORKSPACE_ID = { type: "object", properties: { workspaceId: ID }, required: ["workspaceId"] };
const FILE = {
  type: "object",
  properties: { name: { type: "string" }, contentType: { type: "string" }, content: { type: "string" } },
  required: ["name", "contentType", "content"],
};
/** An item package's types; lengths, counts and schemes are the item specs' (`checkPackage`). */
const PACKAGE = {
  type: "object",
  properties: {
    id: ID,
    version: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
    title: { type: "string" },
    type: { type: "string" },
    typeKeywords: { type: "array", items: { type: "string" } },
    description: { type: "string" },
    snippet: { type: "string" },
    tags: { type: "array", items: { type: "string" } },
    url: { type: ["string", "null"] },
    properties: { type: ["object", "null"] },
    size: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
    data: { anyOf: [FILE, { type: "null" }] },
    thumbnail: { anyOf: [FILE, { type: "null" }] },
  },
  required: [
    "id",
    "version",
    "title",
    "type",
    "typeKeywords",
    "description",
    "snippet",
    "tags",
    "url",
    "properties",
    "size",
    "data",
    "thumbnail",
  ],
};
/** Matches the bounds of a workspace's `config` parameter (`portals-collaborations.routes.ts`). */
const WORKSPACE_CONFIG = {
  type: "object",
  properties: {
    maxItemSizeInMB: { type: "number", exclusiveMinimum: 0, maximum: 1024 },
    maxReplicationPackageSizeInMB: { type: "number", exclusiveMinimum: 0, maximum: 102400 },
    bidirectionalSyncCapable: { type: "boolean" },
  },
  required: ["maxItemSizeInMB", "maxReplicationPackageSizeInMB", "bidirectionalSyncCapable"],
};
const MODE = { enum: ["send", "receive", "sendAndReceive"] };
const RESULTS = {
  type: "object",
  properties: {
    results: {
      type: "array",
      items: {
        type: "object",
        properties: {
          id: { type: "string", maxLength: 64 },
          title: { type: "string", maxLength: 250 },
          ok: { type: "boolean" },
          action: { enum: ["created", "updated", "withdrawn", "deleted"] },
          reason: { type: "string", maxLength: 2000 },
        },
        required: ["id", "title", "ok"],
      },
    },
  },
  required: ["results"],
};

/** Bodies of the calls a guest makes to its host, and of the notices a host sends a guest. */
const REQUEST_SCHEMAS: Record<string, object> = {
  state: { type: "object" },
  left: { type: "object" },
  offer: WORKSPACE_ID,
  holdings: WORKSPACE_ID,
  export: {
    type: "object",
    properties: { workspaceId: ID, ids: { type: "array", maxItems: BATCH_ITEMS, items: ID } },
    required: ["workspaceId", "ids"],
  },
  apply: {
    type: "object",
    properties: {
      workspaceId: ID,
      // Each item's shape is checked on its own, so that one bad item fails alone.
      items: { type: "array", maxItems: BATCH_ITEMS, items: { type: "object" } },
    },
    required: ["workspaceId", "items"],
  },
  withdraw: {
    type: "object",
    properties: {
      workspaceId: ID,
      gone: {
        type: "array",
        maxItems: BATCH_ITEMS,
        items: {
          type: "object",
          properties: { id: ID, state: { enum: ["deleted", "unshared"] } },
          required: ["id", "state"],
        },
      },
    },
    required: ["workspaceId", "gone"],
  },
  nudge: WORKSPACE_ID,
  ended: { type: "object", properties: { workspaceId: ID } },
  rekey: {
    type: "object",
    properties: {
      // Base64 of a raw 32-byte Ed25519 key; of a 64-byte signature.
      publicKey: { type: "string", pattern: "^[A-Za-z0-9+/]{43}=$" },
      proof: { type: "string", pattern: "^[A-Za-z0-9+/]{86}==$" },
      revokePrevious: { type: "boolean" },
    },
    required: ["publicKey", "proof", "revokePrevious"],
  },
  revoke: {
    type: "object",
    properties: { fingerprint: { type: "string", pattern: "^[0-9a-f]{2}(:[0-9a-f]{2}){15}$" } },
    required: ["fingerprint"],
  },
};

/** Answers a guest reads from its host. */
const ANSWER_SCHEMAS: Record<string, object> = {
  state: {
    type: "object",
    properties: {
      collaboration: {
        type: "object",
        properties: {
          id: ID,
          name: { type: "string", maxLength: 100 },
          description: { type: "string", maxLength: 250 },
        },
        required: ["id", "name", "description"],
      },
      workspaces: {
        type: "array",
        maxItems: 1000,
        items: {
          type: "object",
          properties: {
            id: ID,
            name: { type: "string", maxLength: 100 },
            description: { type: "string", maxLength: 250 },
            config: WORKSPACE_CONFIG,
            modes: {
              type: "object",
              maxProperties: 1000,
              propertyNames: ID,
              additionalProperties: MODE,
            },
          },
          required: ["id", "name", "description", "config", "modes"],
        },
      },
      participants: {
        type: "array",
        maxItems: 1000,
        items: {
          type: "object",
          properties: {
            portalId: ID,
            role: { enum: ["host", "guest"] },
            deleteContributed: { type: "boolean" },
            deleteReceived: { type: "boolean" },
          },
          required: ["portalId", "role", "deleteContributed", "deleteReceived"],
        },
      },
    },
    required: ["collaboration", "workspaces", "participants"],
  },
  offer: {
    type: "object",
    properties: {
      items: {
        type: "array",
        items: {
          type: "object",
          properties: {
            id: ID,
            version: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
            size: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
            title: { type: "string", maxLength: 250 },
          },
          required: ["id", "version", "size", "title"],
        },
      },
    },
    required: ["items"],
  },
  export: {
    type: "object",
    properties: {
      // Each entry is checked on its own (`admitExport`), so that one bad item fails alone.
      items: { type: "array", maxItems: BATCH_ITEMS, items: { type: "object" } },
    },
    required: ["items"],
  },
  holdings: {
    type: "object",
    properties: {
      holdings: {
        type: "object",
        propertyNames: ID,
        additionalProperties: { type: "integer", minimum: -1, maximum: Number.MAX_SAFE_INTEGER },
      },
    },
    required: ["holdings"],
  },
  apply: RESULTS,
  withdraw: RESULTS,
};

/**
 * Validators compiled at first use: compiling every operation's schemas when the module loads was
 * ~150 ms of every start, for calls most portals receive rarely or never. `compileAllSchemas`
 * compiles them now (the unit test, so a malformed schema still fails a test).
 */
class Validators {
  readonly #compiled = new Map<string, ValidateFunction>();
  constructor(private readonly schemas: Readonly<Record<string, object>>) {}

  get(op: string): ValidateFunction | undefined {
    let validate = this.#compiled.get(op);
    if (!validate && Object.hasOwn(this.schemas, op)) {
      validate = ajv.compile(this.schemas[op] as object);
      this.#compiled.set(op, validate);
    }
    return validate;
  }

  compileAll(): void {
    for (const op of Object.keys(this.schemas)) this.get(op);
  }
}
const requestValidators = new Validators({ ...REQUEST_SCHEMAS, ...LAYER_COPY_REQUESTS });
const answerValidators = new Validators({ ...ANSWER_SCHEMAS, ...LAYER_COPY_ANSWERS });
const others = new Validators({
  package: PACKAGE,
  exportEntry: {
    type: "object",
    properties: { id: ID, state: { enum: ["present", "deleted", "unshared"] }, item: { type: "object" } },
    required: ["id", "state"],
  },
});

/** Compiles every schema of the protocol now (throws on a malformed one). */
export function compileAllSchemas(): void {
  for (const v of [requestValidators, answerValidators, others]) v.compileAll();
}

function describe(error: ErrorObject | undefined): string {
  if (!error) return "does not have the expected shape";
  const where = error.instancePath ? ` at ${error.instancePath.slice(1).replaceAll("/", ".")}` : "";
  if (error.keyword === "required")
    return `lacks '${(error.params as { missingProperty: string }).missingProperty}'${where}`;
  return `${error.message ?? "is invalid"}${where}`;
}

function shapeProblem(validate: ValidateFunction | undefined, value: unknown): string | undefined {
  if (!validate) return "is not an operation of this protocol";
  return validate(value) ? undefined : describe(validate.errors?.[0]);
}

/**
 * Why the body of a call `op` is malformed, or undefined when its shape is right. Operations this
 * protocol does not have are left to the dispatch, which refuses them by name.
 */
export function requestProblem(op: string, body: unknown): string | undefined {
  const validate = requestValidators.get(op);
  return validate ? shapeProblem(validate, body) : undefined;
}

/** Why a peer's answer to `op` is malformed, or undefined when its shape is right. */
export function answerProblem(op: string, answer: unknown): string | undefined {
  return shapeProblem(answerValidators.get(op), answer);
}

/** How many bytes a base64 text decodes to, or undefined when it is not canonical base64. */
export function base64Bytes(text: string): number | undefined {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}

/** A received item that passed every check: its `size` is the bytes of data actually received. */
export type CheckedPackage = ItemPackage & { bytes: number };

export type Checked = { ok: true; item: CheckedPackage } | { ok: false; result: ItemResult };

const asRecord = (value: unknown) =>
  (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;

/** An item's id and title for a result (an export entry's from its item), safe whatever was sent. */
function label(raw: unknown): { id: string; title: string } {
  const r = asRecord(raw);
  const id = typeof r.id === "string" ? r.id.slice(0, 64) : "(no id)";
  const title = [r.title, asRecord(r.item).title].find((t) => typeof t === "string") as string | undefined;
  return { id, title: title?.slice(0, 250) ?? id };
}

const refused = (raw: unknown, reason: string): Checked => ({
  ok: false,
  result: { ...label(raw), ok: false, reason },
});

/** Every field the public API checks for an item is checked the same way for a peer's. */
const ITEM_FIELDS = Object.keys(itemSpecs) as (keyof typeof itemSpecs)[];

/**
 * Checks one received item against the public API's rules for an item and against
 * `maxItemBytes`. The answer is the item as it may be stored: size measured, thumbnail type
 * read from its bytes.
 */
export function checkPackage(raw: unknown, maxItemBytes: number, limitName: string): Checked {
  const shape = shapeProblem(others.get("package"), raw);
  if (shape) return refused(raw, `refused: the item ${shape}`);
  const pkg = raw as ItemPackage;
  if (pkg.title === "") return refused(raw, "refused: 'title' is empty");
  if (pkg.type === "") return refused(raw, "refused: 'type' is empty");
  for (const field of ITEM_FIELDS) {
    const value = pkg[field];
    if (value === null) continue;
    const reason = checkTypedValue(itemSpecs[field], value);
    if (reason) return refused(raw, `refused: '${field}' ${reason}`);
  }
  let bytes = 0;
  let size = 0;
  let thumbnail = pkg.thumbnail;
  for (const kind of ["data", "thumbnail"] as const) {
    const file = pkg[kind];
    if (!file) continue;
    const name = fileNameSpec.parse(file.name);
    if (!name.ok) return refused(raw, `refused: the ${kind}'s name ${name.reason}`);
    const type = contentTypeSpec.parse(file.contentType);
    if (!type.ok) return refused(raw, `refused: the ${kind}'s content type ${type.reason}`);
    const length = base64Bytes(file.content);
    if (length === undefined) return refused(raw, `refused: the ${kind}'s content is not base64`);
    if (length > maxItemBytes)
      return refused(
        raw,
        `its ${kind} (${(length / MB).toFixed(1)} MB received) is over ${limitName} (${(maxItemBytes / MB).toFixed(1)} MB)`,
      );
    bytes += length;
    if (kind === "data") size = length;
    else {
      // The first 12 base64 characters are the first 9 bytes: enough for every signature.
      const image = imageType(Buffer.from(file.content.slice(0, 12), "base64"));
      if (!image) return refused(raw, "refused: the thumbnail must be a PNG, GIF or JPEG image");
      thumbnail = { ...file, contentType: image };
    }
  }
  return { ok: true, item: { ...pkg, size, thumbnail, bytes } };
}

export interface CallLimits {
  /** Largest item (data or thumbnail), and the limit's name for the reason. */
  maxItemBytes: number;
  limitName: string;
  /** What the rest of the sync may still move (the workspace's maxReplicationPackageSizeInMB). */
  budget: { bytes: number };
}

/** The receiver's limits for one call, from its workspace's configuration. */
export function itemLimits(config: WorkspaceConfig, budget: { bytes: number }): CallLimits {
  const maxItem = config.maxItemSizeInMB * MB;
  return maxItem > MAX_TRANSPORT_BYTES
    ? { maxItemBytes: MAX_TRANSPORT_BYTES, limitName: "what one peer call carries", budget }
    : { maxItemBytes: maxItem, limitName: "the workspace's maxItemSizeInMB", budget };
}

/** What the receiver knew of an item before it arrived: its offer entry. */
export type Offered = ReadonlyMap<string, { size: number; title: string }>;

/**
 * Admits checked items in order while the call stays within BATCH_BYTES (a first item may be
 * larger, as senders send a large item alone) and the sync within its budget; the others fail.
 * The budget was already charged for each offered item's size in the offer.
 */
function admit(
  checked: readonly Checked[],
  limits: CallLimits,
  offered: Offered = new Map(),
): { accepted: ItemPackage[]; refused: ItemResult[] } {
  const accepted: ItemPackage[] = [];
  const refusedItems: ItemResult[] = [];
  let callBytes = 0;
  for (const c of checked) {
    if (!c.ok) {
      refusedItems.push(c.result);
      continue;
    }
    const { bytes, ...item } = c.item;
    const fail = (reason: string) => refusedItems.push({ id: item.id, title: item.title, ok: false, reason });
    if (accepted.length > 0 && callBytes + bytes > BATCH_BYTES) {
      fail(`refused: the call carried more than ${BATCH_BYTES / MB} MB of item data`);
      continue;
    }
    const extra = bytes - (offered.get(item.id)?.size ?? 0);
    if (extra > limits.budget.bytes) {
      fail("refused: over the workspace's maxReplicationPackageSizeInMB for this sync");
      continue;
    }
    limits.budget.bytes -= Math.max(0, extra);
    callBytes += bytes;
    accepted.push(item);
  }
  return { accepted, refused: refusedItems };
}

/** Host side: the items of a guest's `apply` call that may be stored, and why the others fail. */
export function admitApply(items: readonly unknown[], limits: CallLimits) {
  const seen = new Set<string>();
  const checked = items.map((raw): Checked => {
    const c = checkPackage(raw, limits.maxItemBytes, limits.limitName);
    if (!c.ok) return c;
    if (seen.has(c.item.id)) return refused(raw, "refused: sent twice in one call");
    seen.add(c.item.id);
    return c;
  });
  return admit(checked, limits);
}

export type Withdrawal = { id: string; state: "deleted" | "unshared" };

/**
 * Guest side: what a host's `export` answer for `requested` may change here. Entries for ids not
 * requested (or answered twice) fail; requested ids the answer skipped fail too.
 */
export function admitExport(
  entries: readonly unknown[],
  requested: readonly string[],
  limits: CallLimits,
  offered: Offered,
): { accepted: ItemPackage[]; gone: Withdrawal[]; refused: ItemResult[] } {
  const open = new Set(requested);
  const gone: Withdrawal[] = [];
  const checked: Checked[] = [];
  for (const raw of entries) {
    const shape = shapeProblem(others.get("exportEntry"), raw);
    if (shape) {
      checked.push(refused(raw, `refused: the host's answer ${shape}`));
      continue;
    }
    const entry = raw as { id: string; state: "present" | "deleted" | "unshared"; item?: unknown };
    if (!open.has(entry.id)) {
      checked.push(refused(raw, "refused: the host sent an item that was not requested"));
      continue;
    }
    open.delete(entry.id);
    if (entry.state !== "present") {
      gone.push({ id: entry.id, state: entry.state });
      continue;
    }
    const c = checkPackage(entry.item, limits.maxItemBytes, limits.limitName);
    if (c.ok && c.item.id !== entry.id) {
      checked.push(refused(raw, "refused: the host's package names another item"));
      continue;
    }
    checked.push(c);
  }
  const { accepted, refused: refusedItems } = admit(checked, limits, offered);
  for (const id of open) {
    const title = offered.get(id)?.title ?? id;
    refusedItems.push({ id, title, ok: false, reason: "the host's answer left this item out" });
  }
  return { accepted, gone, refused: refusedItems };
}
