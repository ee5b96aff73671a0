import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type Caller, requirePrivilege } from "../auth/caller.js";
import { errors } from "../errors.js";
import type { Organization } from "../portal/portal.service.js";
import type { Privilege } from "../roles/privileges.js";
import type { Services } from "../services.js";
import {
  MAX_JSON_DEPTH,
  NUL_REASON,
  nestsDeeper,
  type ParamSpecs,
  type ParamValues,
  parseParams,
} from "../validation/params.js";
import { type Format, parseFormat, render } from "./render.js";

/**
 * One request pipeline for every endpoint. A route is data: where it lives, who may call it, the
 * parameters it takes; the pipeline does the rest in the same order everywhere:
 *   merge query and form parameters -> choose the format -> authenticate -> check the privilege
 *   -> parse and validate parameters -> call the service -> render.
 */
export interface RouteDef<S extends ParamSpecs = ParamSpecs> {
  /** Stable name used in logs and metrics, e.g. `portal.update`. */
  name: string;
  methods: readonly ("GET" | "POST")[];
  /**
   * Path below the API root, with `:params`, e.g. `/portals/:portalId/update`; several when the
   * public API answers the same operation at more than one address (with and without a folder).
   */
  path: string | readonly string[];
  /**
   * `sharing` is `/sharing/rest`, `portaladmin` is `/portaladmin`, `server` is `/rest` (the hosted
   * services, where ArcGIS Server would answer).
   */
  root?: "sharing" | "portaladmin" | "server";
  /**
   * `none`: credentials are not read (info, generateToken). `optional`: anonymous allowed, a token
   * that is sent must be valid. `required`: anonymous callers get 499.
   */
  auth: "none" | "optional" | "required";
  /** Privilege every caller needs; services check finer rules (self or administrator, ...). */
  privilege?: Privilege;
  /**
   * A privilege check that depends on which parameters were sent; runs before validation, so a
   * caller without the privilege learns nothing from validation errors.
   */
  authorize?: (caller: Caller | null, raw: Readonly<Record<string, string>>) => void;
  params: S;
  handler: (ctx: HandlerContext<S>) => Promise<unknown>;
}

export interface HandlerContext<S extends ParamSpecs> {
  params: ParamValues<S>;
  /** Parameters sent with an empty value. */
  empty: Set<keyof S & string>;
  /** Files of a multipart request, by field name. */
  files: Record<string, UploadedFile>;
  path: Record<string, string>;
  caller: Caller | null;
  services: Services;
  org: Organization;
  /** The bearer token of this request, when one was sent. */
  token: string | undefined;
  requestIp: string;
  /** Whether the request came over HTTPS (directly, or as a trusted proxy says). */
  secure: boolean;
  /** Public base of the API root, e.g. `https://gis.example.com/portal/sharing/rest`. */
  apiBase: string;
}

/** Identity helper that keeps the parameter types of a route definition. */
export function defineRoute<S extends ParamSpecs>(def: RouteDef<S>): RouteDef<S> {
  return def;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The operation's stable name (`RouteDef.name`, or `health`, `ready`, `metrics`). */
    name?: string;
  }
  interface FastifyRequest {
    /** Loaded once per request by the organization hook (CORS and allSSL need it first). */
    org: Organization;
    /** The error envelope's code when the answer is an error (for metrics). */
    errorCode: number | undefined;
  }
}

export interface PipelineOptions {
  services: Services;
  contextPath: string;
  /** The public base URL; a function because with port 0 it is known only after listening. */
  publicUrl: () => string;
}

/** Query and form parameters as one string map; for repeated names the last value wins. */
export function mergedParams(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  const add = (source: unknown) => {
    if (!source || typeof source !== "object") return;
    for (const [key, value] of Object.entries(source as Record<string, unknown>)) {
      const v = Array.isArray(value) ? value.at(-1) : value;
      if (v === undefined || v === null) continue;
      if (isMultipartPart(v)) {
        if (v.type === "field") out[key] = String(v.value ?? "");
        continue;
      }
      // A JSON body (a convenience for scripts) carries objects; ArcGIS form semantics want text.
      // Nesting thousands deep would overflow the stack in JSON.stringify; no parameter needs it.
      if (typeof v === "object" && nestsDeeper(v, MAX_JSON_DEPTH)) {
        throw errors.invalidParameter(key, `must not nest deeper than ${MAX_JSON_DEPTH} levels`);
      }
      out[key] = typeof v === "string" ? v : typeof v === "object" ? JSON.stringify(v) : String(v);
    }
  };
  add(request.query);
  add(request.body);
  return out;
}

/** A file sent in a multipart/form-data request (an item's data, a thumbnail). */
export interface UploadedFile {
  filename: string;
  contentType: string;
  data: Buffer;
}

interface MultipartPart {
  type: "field" | "file";
  value?: unknown;
  filename?: string;
  mimetype?: string;
}

function isMultipartPart(value: unknown): value is MultipartPart {
  const t = (value as MultipartPart | null)?.type;
  return (
    typeof value === "object" && value !== null && (t === "field" || t === "file") && "fieldname" in value
  );
}

/** The files of a multipart request, by field name. */
export function uploadedFiles(request: FastifyRequest): Record<string, UploadedFile> {
  const out: Record<string, UploadedFile> = {};
  if (!request.isMultipart() || !request.body || typeof request.body !== "object") return out;
  for (const [key, value] of Object.entries(request.body as Record<string, unknown>)) {
    const part = Array.isArray(value) ? value.at(-1) : value;
    if (isMultipartPart(part) && part.type === "file" && Buffer.isBuffer(part.value)) {
      out[key] = {
        filename: part.filename ?? key,
        contentType: part.mimetype ?? "application/octet-stream",
        data: part.value,
      };
    }
  }
  return out;
}

/** The token of a request: the `token` parameter, or a Bearer header (`wire.md` §1). */
export function tokenOf(request: FastifyRequest, params: Record<string, string>): string | undefined {
  if (params.token) return params.token;
  for (const header of ["x-esri-authorization", "authorization"]) {
    const value = request.headers[header];
    if (typeof value === "string") {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(value);
      if (match) return match[1];
    }
  }
  return undefined;
}

export function apiRoot(root: RouteDef["root"], contextPath: string): string {
  if (root === "portaladmin") return `${contextPath}/portaladmin`;
  if (root === "server") return `${contextPath}/rest`;
  return `${contextPath}/sharing/rest`;
}

export function registerRoutes(
  app: FastifyInstance,
  routes: readonly RouteDef[],
  options: PipelineOptions,
): void {
  for (const route of routes) {
    const root = apiRoot(route.root, options.contextPath);
    const paths = typeof route.path === "string" ? [route.path] : route.path;
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      const raw = mergedParams(request);
      const format: Format = parseFormat(raw.f);
      const path = request.params as Record<string, string>;
      // `<portal_id>` is the organization id or `self` (`wire.md` §1), checked here for every route.
      if (
        path.portalId !== undefined &&
        path.portalId.toLowerCase() !== "self" &&
        path.portalId !== request.org.id
      ) {
        throw errors.organizationNotFound(path.portalId);
      }
      // Path segments (ids, usernames, service names) go to lookups unchecked; NUL is in no id or
      // name, and PostgreSQL cannot compare text holding it, so it is refused here for every route,
      // as the parameter specs refuse it in query and form values.
      for (const [name, value] of Object.entries(path)) {
        if (value.includes("\u0000")) throw errors.invalidParameter(name, NUL_REASON);
      }
      const token = route.auth === "none" ? undefined : tokenOf(request, raw);
      let caller: Caller | null = null;
      if (token !== undefined) caller = await options.services.auth.authenticate(token);
      else if (route.auth === "required") throw errors.tokenRequired();
      if (route.privilege) requirePrivilege(caller, route.privilege);
      route.authorize?.(caller, raw);
      const { values, empty } = parseParams(route.params, raw);
      const result = await route.handler({
        params: values,
        empty,
        files: uploadedFiles(request),
        path,
        caller,
        services: options.services,
        org: request.org,
        token,
        requestIp: request.ip,
        secure: request.protocol === "https",
        apiBase: `${options.publicUrl()}${options.contextPath}/sharing/rest`,
      });
      return render(reply, format, result, route.name);
    };
    for (const path of paths)
      app.route({
        method: [...route.methods],
        url: `${root}${path}`,
        // Metrics and logs name the operation, not the URL with its ids.
        config: { name: route.name },
        handler,
      });
  }
}
