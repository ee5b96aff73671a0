/**
 * The peer calls that copy hosted layers (`layer-copy-source.ts` answers them, the receiving
 * guest's sync makes them): their request bodies and answers, joined to the protocol's shapes in
 * `peer-messages.ts`. The shapes prove only that a message can be read; every definition and
 * feature in them is then checked as the public API checks its own (`layer-copy.ts`).
 */

/** Services per `layerServices` call, and features and tombstones per `layerChanges` page. */
export const SERVICES_PER_CALL = 100;
export const FEATURES_PER_PAGE = 2_000;
/** A page stops growing past this many bytes of features and attachments (one feature always goes). */
export const PAGE_BYTES = 8 * 1024 * 1024;

const ID = { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" };
const MOMENT = { type: "integer", minimum: -1, maximum: Number.MAX_SAFE_INTEGER };
const CURSOR = {
  type: "object",
  properties: { moment: MOMENT, objectId: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER } },
  required: ["moment", "objectId"],
};

const LAYER_ID = { type: "integer", minimum: 0, maximum: 999_999_999 };
const OID = { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER };
const LAYER_CURSOR = {
  type: "object",
  properties: { rows: CURSOR, deletes: CURSOR },
  required: ["rows", "deletes"],
};
const CURSOR_LIST = {
  type: "array",
  maxItems: 2000,
  items: {
    type: "object",
    properties: { id: LAYER_ID, rows: CURSOR, deletes: CURSOR },
    required: ["id", "rows", "deletes"],
  },
};
/** A page of a layer's changes, whichever side reads it. */
const PAGE = {
  type: "object",
  properties: {
    // Each feature is checked on its own against the layer (`layer-copy.ts`), so one bad one fails alone.
    features: { type: "array", maxItems: FEATURES_PER_PAGE, items: { type: "object" } },
    deletes: { type: "array", maxItems: FEATURES_PER_PAGE, items: OID },
    moments: { type: "array", maxItems: FEATURES_PER_PAGE, items: MOMENT },
    deleteMoments: { type: "array", maxItems: FEATURES_PER_PAGE, items: MOMENT },
    deleteGlobalIds: {
      type: "array",
      maxItems: FEATURES_PER_PAGE,
      items: { type: ["string", "null"], maxLength: 38 },
    },
    rowsNext: CURSOR,
    deletesNext: CURSOR,
    done: { type: "boolean" },
  },
  required: ["features", "deletes", "rowsNext", "deletesNext", "done"],
};
/** A hosted service as its host describes it: what `copyDefine` carries and `layerServices` lists. */
const SERVICE_STATE = {
  type: "object",
  properties: {
    id: ID,
    name: { type: "string", maxLength: 128 },
    modified: MOMENT,
    definition: { type: "object" },
    layers: { type: "array", maxItems: 1000, items: { type: "object" } },
    tables: { type: "array", maxItems: 1000, items: { type: "object" } },
    moments: {
      type: "array",
      maxItems: 2000,
      items: {
        type: "object",
        properties: { id: { type: "integer", minimum: 0 }, moment: MOMENT },
        required: ["id", "moment"],
      },
    },
    bytes: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
  },
  required: ["id", "name", "modified", "definition", "layers", "tables", "moments", "bytes"],
};
const COUNTS = {
  type: "object",
  properties: {
    id: LAYER_ID,
    added: OID,
    updated: OID,
    deleted: OID,
    failed: OID,
    failures: {
      type: "array",
      maxItems: 100,
      items: {
        type: "object",
        properties: { objectId: { type: ["integer", "null"] }, reason: { type: "string", maxLength: 2000 } },
        required: ["objectId", "reason"],
      },
    },
    conflicts: {
      type: "array",
      maxItems: 100,
      items: {
        type: "object",
        properties: {
          objectId: OID,
          winner: { enum: ["origin", "copy"] },
          reason: { type: "string", maxLength: 2000 },
        },
        required: ["objectId", "winner", "reason"],
      },
    },
  },
  required: ["id", "added", "updated", "deleted", "failed", "failures"],
};
const MAX_BYTES = { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER };
const SERVICE_IDS = { type: "array", maxItems: SERVICES_PER_CALL, items: ID };
/** What the side that stored a page answers: its counts for the layer. */
const OUTCOME = { type: "object", properties: { outcome: COUNTS }, required: ["outcome"] };

export const LAYER_COPY_REQUESTS: Record<string, object> = {
  layerEdits: {
    type: "object",
    properties: { workspaceId: ID, id: ID, layerId: LAYER_ID, page: PAGE, seen: LAYER_CURSOR },
    required: ["workspaceId", "id", "layerId", "page", "seen"],
  },
  copyState: {
    type: "object",
    properties: { workspaceId: ID, ids: SERVICE_IDS },
    required: ["workspaceId", "ids"],
  },
  copyDefine: {
    type: "object",
    properties: { workspaceId: ID, service: SERVICE_STATE },
    required: ["workspaceId", "service"],
  },
  copyPage: {
    type: "object",
    properties: { workspaceId: ID, id: ID, layerId: LAYER_ID, page: PAGE, next: LAYER_CURSOR },
    required: ["workspaceId", "id", "layerId", "page", "next"],
  },
  copyEdits: {
    type: "object",
    properties: { workspaceId: ID, id: ID, layerId: LAYER_ID, maxBytes: MAX_BYTES },
    required: ["workspaceId", "id", "layerId"],
  },
  copyEditsDone: {
    type: "object",
    properties: { workspaceId: ID, id: ID, layerId: LAYER_ID, sent: LAYER_CURSOR },
    required: ["workspaceId", "id", "layerId", "sent"],
  },
  layerServices: {
    type: "object",
    properties: { workspaceId: ID, ids: SERVICE_IDS },
    required: ["workspaceId", "ids"],
  },
  layerChanges: {
    type: "object",
    properties: {
      workspaceId: ID,
      id: ID,
      layerId: LAYER_ID,
      rowsAfter: CURSOR,
      deletesAfter: CURSOR,
      upTo: MOMENT,
      /** What the receiver's package budget has left: the page stops there (one feature always goes). */
      maxBytes: MAX_BYTES,
    },
    required: ["workspaceId", "id", "layerId", "rowsAfter", "deletesAfter", "upTo"],
  },
};

export const LAYER_COPY_ANSWERS: Record<string, object> = {
  layerServices: {
    type: "object",
    properties: {
      services: {
        type: "array",
        maxItems: SERVICES_PER_CALL,
        items: SERVICE_STATE,
      },
    },
    required: ["services"],
  },
  layerChanges: PAGE,
  layerEdits: OUTCOME,
  copyState: {
    type: "object",
    properties: {
      copyData: { type: "boolean" },
      copies: {
        type: "array",
        maxItems: SERVICES_PER_CALL,
        items: {
          type: "object",
          properties: {
            id: ID,
            mode: { enum: ["copy", "reference", null] },
            originModified: { type: ["integer", "null"] },
            editable: { type: "boolean" },
            layers: CURSOR_LIST,
          },
          required: ["id", "mode", "originModified", "editable", "layers"],
        },
      },
    },
    required: ["copyData", "copies"],
  },
  copyDefine: {
    type: "object",
    properties: {
      decision: {
        type: "object",
        properties: {
          mode: { enum: ["current", "copy", "reference", "failed"] },
          reason: { type: "string", maxLength: 4000 },
        },
        required: ["mode"],
      },
      layers: CURSOR_LIST,
    },
    required: ["decision", "layers"],
  },
  copyPage: OUTCOME,
  copyEdits: {
    type: "object",
    properties: { page: PAGE, seen: LAYER_CURSOR, next: LAYER_CURSOR },
    required: ["page", "seen", "next"],
  },
  copyEditsDone: { type: "object", properties: { success: { const: true } }, required: ["success"] },
};
