import { type Caller, isCaller } from "../auth/caller.js";
import { errors, PorticoError } from "../errors.js";

/** Why one item of a bulk operation failed, as ArcGIS reports it in the item's result. */
export interface ItemError {
  code: number;
  message: string;
}

/** One item's entry in a bulk operation's `results`: its outcome, and what the operation adds. */
export type ItemResult<T extends object> = { itemId: string; success: boolean; error?: ItemError } & T;

/**
 * Runs a bulk operation (`shareItems`, `deleteItems`, `moveItems`, ...) item by item, in the order
 * asked, each in its own transaction (`operation`'s): each item succeeds or fails alone, and an
 * item refused (not found, not the caller's, protected) is reported in its result, with `notDone`'s
 * fields, rather than failing the whole request. Anything but a refusal (a database failure) is
 * thrown: the items before it stay done, as their results would have said.
 */
export async function eachItemAlone<T extends object>(
  itemIds: readonly string[],
  operation: (itemId: string) => Promise<T>,
  notDone: T,
): Promise<ItemResult<T>[]> {
  const results: ItemResult<T>[] = [];
  for (const itemId of itemIds) {
    try {
      results.push({ itemId, success: true, ...(await operation(itemId)) });
    } catch (err) {
      if (!(err instanceof PorticoError)) throw err;
      results.push({ itemId, success: false, ...notDone, error: { code: err.code, message: err.message } });
    }
  }
  return results;
}

/**
 * A bulk operation on `username`'s content is for that user, or for an administrator with
 * `adminPrivilege`; anyone else is refused before any item is looked at (each item is then checked
 * on its own as well).
 */
export function requireBulkCaller(
  caller: Caller | null,
  username: string,
  adminPrivilege: string,
  what: string,
): asserts caller is Caller {
  if (caller === null) throw errors.tokenRequired();
  if (!isCaller(caller, username) && !caller.privileges.has(adminPrivilege)) {
    throw errors.forbidden(`Only '${username}' or an administrator may ${what} their items.`);
  }
}
