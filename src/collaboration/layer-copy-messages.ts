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

export const LAYER_COPY_REQUESTS: Record<string, object> = {
  layerServices: {
    type: "object",
    properties: { workspaceId: ID, ids: { type: "array", maxItems: SERVICES_PER_CALL, items: ID } },
    required: ["workspaceId", "ids"],
  },
  layerChanges: {
    type: "object",
    properties: {
      workspaceId: ID,
      id: ID,
      layerId: { type: "integer", minimum: 0, maximum: 999_999_999 },
      rowsAfter: CURSOR,
      deletesAfter: CURSOR,
      upTo: MOMENT,
      /** What the receiver's package budget has left: the page stops there (one feature always goes). */
      maxBytes: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
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
        items: {
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
        },
      },
    },
    required: ["services"],
  },
  layerChanges: {
    type: "object",
    properties: {
      // Each feature is checked on its own against the layer (`layer-copy.ts`), so one bad one fails alone.
      features: { type: "array", maxItems: FEATURES_PER_PAGE, items: { type: "object" } },
      deletes: {
        type: "array",
        maxItems: FEATURES_PER_PAGE,
        items: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      },
      rowsNext: CURSOR,
      deletesNext: CURSOR,
      done: { type: "boolean" },
    },
    required: ["features", "deletes", "rowsNext", "deletesNext", "done"],
  },
};
