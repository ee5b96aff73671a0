/**
 * The acknowledgement of a change, `{ success: true }`, with the fields the operation answers
 * beside it: `ok()`, `ok({ itemId })`, or `{ ...fields, ...ok() }` where ArcGIS puts `success`
 * after them.
 *
 * Where answers are built: a domain service returns what the operation did in domain terms (the
 * record, the new id, what changed) or nothing, and never builds an acknowledgement; the route
 * (`src/http/routes/*.routes.ts`) builds the ArcGIS answer around it, with `success: true` at the
 * top level and whatever names ArcGIS puts around the result (`{ success: true, folder }`). The
 * exception is a batch whose elements succeed or fail one by one (applyEdits' and attachment
 * edits' `{ objectId, globalId, success }`, the per-element `results` of shareItems, unshareItems
 * and a group's updateUsers): there `success` is data, an outcome the service decides, not an
 * acknowledgement, and the service builds those entries. The peer endpoint, the handler of
 * `/portico/peer/<op>`, builds its answers as a route does (see its comment).
 */
export function ok(): { success: true };
export function ok<T extends object>(fields: T & { success?: never }): { success: true } & T;
export function ok(fields: object = {}): { success: true } {
  return { success: true, ...fields };
}
