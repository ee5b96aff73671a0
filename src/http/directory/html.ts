import { createHash } from "node:crypto";

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text made safe for HTML content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/** The style of every page of the directory: the only thing its policy lets in. */
export const PAGE_STYLE =
  "body{font-family:system-ui,sans-serif;margin:0;color:#1a1a1a;background:#fff;line-height:1.45}" +
  "header{display:flex;flex-wrap:wrap;gap:1rem;justify-content:space-between;align-items:center;padding:.5rem 2rem;background:#eef1f5;border-bottom:1px solid #c4c9d0}" +
  "main{padding:1rem 2rem;max-width:80rem}a{color:#0645ad}" +
  "nav ol{list-style:none;display:flex;flex-wrap:wrap;gap:.3rem;padding:0;margin:0}" +
  'nav li+li::before{content:"/";margin-right:.3rem;color:#555}' +
  "dl{display:grid;grid-template-columns:minmax(8rem,max-content) 1fr;gap:.15rem 1rem;margin:.4rem 0}" +
  "dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}" +
  "table{border-collapse:collapse;margin:.4rem 0}th,td{border:1px solid #c4c9d0;padding:.2rem .5rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}" +
  "ul.links{columns:18rem}.meta{color:#444}.error{color:#a00;border:1px solid #a00;padding:.5rem}" +
  "form.op label{display:block;margin-top:.7rem;font-weight:600}form.op .hint{font-weight:400;color:#444}" +
  "input[type=text],input[type=password],textarea,select{width:100%;max-width:40rem;padding:.3rem;box-sizing:border-box;font:inherit}" +
  "button{margin-top:1rem;padding:.4rem 1.2rem;font:inherit}form.op button{display:block}header form{display:inline;margin:0}header button{margin:0}" +
  "pre{background:#f5f5f5;padding:1rem;overflow:auto}";

/**
 * The policy of the directory's pages: nothing but their own style (by its hash), no script,
 * forms posted to the portal only, and never inside another site's frame (with `X-Frame-Options`
 * for browsers that predate `frame-ancestors`).
 */
export const PAGE_CSP = `default-src 'none'; style-src 'sha256-${createHash("sha256").update(PAGE_STYLE).digest("base64")}'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`;
