import { randomUUID } from "node:crypto";

/** ArcGIS-style identifier: 32 lower-case hexadecimal characters. */
export function newId(): string {
  return randomUUID().replaceAll("-", "");
}
