/**
 * A layer query's `where`, from the text a client sends to a SQL fragment with bound parameters:
 * `parseWhere` (where-parser.ts) then `compileWhereAst` (where-compiler.ts). The caller appends
 * the fragment to its own `SELECT … FROM <layer table> WHERE`, and maps an error to the ArcGIS
 * envelope naming the `where` parameter (`describeWhereError` gives the message).
 */
import {
  type CompileOptions,
  compileWhereAst,
  type WhereCompileError,
  type WhereFragment,
} from "./where-compiler.js";
import { parseWhere, type WhereSyntaxError } from "./where-parser.js";

export type {
  CompileOptions,
  EsriFieldType,
  WhereEngine,
  WhereField,
  WhereFragment,
} from "./where-compiler.js";
export { WHERE_LIMITS } from "./where-parser.js";

export type WhereError = WhereSyntaxError | WhereCompileError;

export function compileWhere(
  where: string,
  options: CompileOptions,
): { ok: true; value: WhereFragment } | { ok: false; error: WhereError } {
  const parsed = parseWhere(where);
  if (!parsed.ok) return parsed;
  return compileWhereAst(parsed.value, options);
}

/**
 * A message for the caller's error envelope; positions count characters from 0. `parameter` names
 * the clause: `where`, or `havingClause`, which the same parser reads.
 */
export function describeWhereError(error: WhereError, parameter = "where"): string {
  switch (error.kind) {
    case "tooLong":
      return `${parameter} is ${error.length} characters long; at most ${error.max} are allowed`;
    case "tooDeep":
      return `${parameter} nests deeper than ${error.max} levels (at character ${error.position})`;
    case "tooComplex":
      return `${parameter} has more than ${error.max} terms (at character ${error.position})`;
    case "syntax":
      return `Invalid ${parameter} at character ${error.position}: ${error.message}`;
    case "unknownFunction":
      return `${parameter} uses an unsupported function '${error.name}' (at character ${error.position})`;
    case "unknownField":
      return `${parameter} names a field that does not exist: '${error.name}' (at character ${error.position})`;
    case "ambiguousField":
      return `${parameter} names a field that matches several fields: '${error.name}' (at character ${error.position})`;
    case "unsupportedField":
      return `${parameter} cannot use field '${error.name}' of type ${error.fieldType} (at character ${error.position})`;
    case "typeMismatch":
      return `Invalid ${parameter} at character ${error.position}: ${error.message}`;
  }
}
