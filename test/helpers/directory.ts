/**
 * A browser of the API directory for tests without one: keeps cookies as a browser does (by name,
 * removed by `Max-Age=0`), does not follow redirects, and keeps every page it was answered so that
 * a test can scan them all.
 */
export class DirectoryBrowser {
  readonly cookies = new Map<string, string>();
  readonly pages: { url: string; html: string }[] = [];

  constructor(readonly origin: string) {}

  get cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  async request(
    url: string,
    init: { method?: string; body?: URLSearchParams | FormData; cookie?: string } = {},
  ) {
    const full = url.startsWith("http") ? url : `${this.origin}${url}`;
    const res = await fetch(full, {
      method: init.method ?? "GET",
      body: init.body,
      redirect: "manual",
      headers: { cookie: init.cookie ?? this.cookieHeader },
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = (pair as string).indexOf("=");
      const name = (pair as string).slice(0, eq);
      if (/max-age=0/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, (pair as string).slice(eq + 1));
    }
    const html = await res.text();
    if ((res.headers.get("content-type") ?? "").includes("text/html")) this.pages.push({ url: full, html });
    return { res, html };
  }

  get(url: string) {
    return this.request(url);
  }

  post(url: string, params: Record<string, string>) {
    return this.request(url, { method: "POST", body: new URLSearchParams(params) });
  }

  /** Signs in through the sign-in page; answers the redirect's location. */
  async signIn(username: string, password: string, next?: string): Promise<string | null> {
    const query = next === undefined ? "" : `?next=${encodeURIComponent(next)}`;
    const { html } = await this.get(`/sharing/rest/login${query}`);
    const { res } = await this.post("/sharing/rest/login", {
      directory_form: hiddenValue(html, "directory_form") ?? "",
      next: hiddenValue(html, "next") ?? "",
      username,
      password,
    });
    return res.headers.get("location");
  }
}

/** The value of a form's input named `name`. */
export function hiddenValue(html: string, name: string): string | undefined {
  const re = new RegExp(`<input[^>]*name="${name}"[^>]*value="([^"]*)"`);
  return re.exec(html)?.[1]?.replaceAll("&amp;", "&");
}

/** Every URL a page holds in an attribute: links, form actions, sources. */
export function urlsOf(html: string): string[] {
  return [...html.matchAll(/\s(?:href|action|src|formaction)="([^"]*)"/g)].map((m) => m[1] as string);
}

/** The hrefs of a page's links. */
export function hrefsOf(html: string): string[] {
  return [...html.matchAll(/<a [^>]*href="([^"]*)"/g)].map((m) => (m[1] as string).replaceAll("&amp;", "&"));
}
