import type { IncomingHttpHeaders } from "node:http";
import { PorticoError } from "../../errors.js";
import type { Services } from "../../services.js";
import { p } from "../../validation/params.js";
import { PAGE_CSP } from "../directory/html.js";
import { type PageContext, signInPage, signInPath, signOutPage, type Viewer } from "../directory/pages.js";
import {
  CSRF_FIELD,
  csrfMatches,
  csrfOf,
  directoryTokenOf,
  returnPath,
  SIGN_IN_FORM_COOKIE,
  signInCookie,
  signInFormBinding,
  signInFormMatches,
  signOutCookie,
} from "../directory/session.js";
import { setCookie } from "../oauth-pages.js";
import { defineRoute } from "../pipeline.js";
import { WebAnswer } from "../render.js";

/** A sign-in form: a name, a password, a return path and a secret. */
const SMALL_BODY = 16 * 1024;

/**
 * The sign-in and sign-out of the API directory (the `f=html` pages), as ArcGIS Server's Services
 * Directory has them at `/rest/login` and `/rest/logout`. Pages whatever `f` says: what they set is
 * a cookie only the directory's pages accept (`directory/session.ts`), never a token in a URL.
 */

/** The context path, from the API root's public URL. */
const contextPathOf = (apiBase: string) => new URL(apiBase).pathname.replace(/\/sharing\/rest$/, "");

async function viewerOf(headers: IncomingHttpHeaders, services: Services): Promise<Viewer | undefined> {
  const session = directoryTokenOf(headers.cookie);
  if (session === undefined) return undefined;
  const caller = await services.auth.directorySession(session);
  return caller ? { username: caller.username, csrf: csrfOf(session) } : undefined;
}

function pageContext(contextPath: string, viewer: Viewer | undefined, label: string): PageContext {
  return {
    contextPath,
    path: signInPath(contextPath),
    viewer,
    crumbs: [{ label: "sharing/rest", href: `${contextPath}/sharing/rest?f=html` }, { label }],
  };
}

const portalNameOf = (name: unknown) => (typeof name === "string" && name !== "" ? name : "portico");

/** The sign-in page with a new form secret (and its cookie). */
function signInAnswer(options: {
  contextPath: string;
  secure: boolean;
  viewer: Viewer | undefined;
  portalName: string;
  next: string;
  username?: string | undefined;
  error?: string | undefined;
}): WebAnswer {
  const form = signInFormBinding({
    contextPath: options.contextPath,
    secure: options.secure,
    path: signInPath(options.contextPath),
  });
  return new WebAnswer({
    page: signInPage({
      ctx: pageContext(options.contextPath, options.viewer, "login"),
      portalName: options.portalName,
      formSecret: form.secret,
      next: options.next,
      username: options.username,
      error: options.error,
    }),
    csp: PAGE_CSP,
    cookies: [form.cookie],
  });
}

const signInParams = { next: p.string({ maxLength: 2048 }) };

export const directoryRoutes = [
  defineRoute({
    name: "directory.signInPage",
    methods: ["GET"],
    path: "/login",
    auth: "none",
    params: signInParams,
    handler: async ({ params, headers, services, apiBase, secure, org }) => {
      const contextPath = contextPathOf(apiBase);
      return signInAnswer({
        contextPath,
        secure,
        viewer: await viewerOf(headers, services),
        portalName: portalNameOf(org.settings.name),
        next: returnPath(params.next, contextPath),
      });
    },
  }),
  defineRoute({
    name: "directory.signIn",
    noStore: true,
    methods: ["POST"],
    path: "/login",
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: {
      ...signInParams,
      directory_form: p.string({ maxLength: 128 }),
      username: p.string({ maxLength: 128 }),
      password: p.string({ maxLength: 1024 }),
    },
    // The password sign-in of `generateToken` (lockout, disabled accounts, the hashing limiter);
    // the session goes into the cookie, and the browser back to the page it came from.
    handler: async ({ params, headers, services, apiBase, secure, org, requestIp }) => {
      const contextPath = contextPathOf(apiBase);
      const next = returnPath(params.next, contextPath);
      const again = async (error: string) =>
        signInAnswer({
          contextPath,
          secure,
          viewer: await viewerOf(headers, services),
          portalName: portalNameOf(org.settings.name),
          next,
          username: params.username,
          error,
        });
      if (!signInFormMatches(params.directory_form, headers.cookie)) {
        return again("The sign-in form was not sent from this page, or it expired. Sign in again.");
      }
      if (!params.username || !params.password) return again("Enter your username and password.");
      let session: { token: string; maxAgeSeconds: number };
      try {
        session = await services.auth.directorySignIn({
          username: params.username,
          password: params.password,
          requestIp,
        });
      } catch (err) {
        if (!(err instanceof PorticoError)) throw err;
        return again([err.message, ...err.details].join(" "));
      }
      return new WebAnswer({
        location: `${next}?f=html`,
        cookies: [
          setCookie(SIGN_IN_FORM_COOKIE, "", {
            path: signInPath(contextPath),
            maxAgeSeconds: 0,
            secure,
            sameSite: "Strict",
          }),
          signInCookie(session.token, { contextPath, maxAgeSeconds: session.maxAgeSeconds, secure }),
        ],
      });
    },
  }),
  defineRoute({
    name: "directory.signOutPage",
    methods: ["GET"],
    path: "/logout",
    auth: "none",
    params: {},
    handler: async ({ headers, services, apiBase }) => {
      const contextPath = contextPathOf(apiBase);
      const viewer = await viewerOf(headers, services);
      return new WebAnswer({
        page: signOutPage({ ctx: pageContext(contextPath, viewer, "logout") }),
        csp: PAGE_CSP,
      });
    },
  }),
  defineRoute({
    name: "directory.signOut",
    methods: ["POST"],
    path: "/logout",
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: { [CSRF_FIELD]: p.string({ maxLength: 128 }) },
    // Ends the session in the database too (a copied cookie is worth nothing after), but only
    // from the directory's own form: another site cannot sign a user out.
    handler: async ({ params, headers, services, apiBase, secure }) => {
      const contextPath = contextPathOf(apiBase);
      const session = directoryTokenOf(headers.cookie);
      if (session !== undefined && !csrfMatches(params[CSRF_FIELD], session)) {
        const viewer = await viewerOf(headers, services);
        return new WebAnswer({
          page: signOutPage({
            ctx: pageContext(contextPath, viewer, "logout"),
            error: "The sign-out form was not sent from this portal's page. Use the button below.",
          }),
          csp: PAGE_CSP,
        });
      }
      if (session !== undefined && (await services.auth.directorySession(session))) {
        await services.auth.revoke(session);
      }
      return new WebAnswer({
        location: `${contextPath}/sharing/rest?f=html`,
        cookies: [signOutCookie({ contextPath, secure })],
      });
    },
  }),
];
