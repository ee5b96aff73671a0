/** Just enough of the portal API to prepare a benchmark: sign in, create users, read a resource. */

export const ADMIN = { username: "bench_admin", password: "bench-admin-password-1" } as const;

/** Environment that makes `portico serve` create this administrator on first start. */
export const ADMIN_ENV = {
  PORTICO_ADMIN_USERNAME: ADMIN.username,
  PORTICO_ADMIN_PASSWORD: ADMIN.password,
} as const;

export class PortalApi {
  /** @param origin `http://127.0.0.1:<port>` of a portal without context path. */
  constructor(readonly origin: string) {}

  /** A token bound to the caller's address (127.0.0.1), like the load generator's requests. */
  async signIn(username: string, password: string): Promise<string> {
    const answer = await this.post("/sharing/rest/generateToken", {
      username,
      password,
      client: "requestip",
    });
    if (typeof answer.token !== "string") throw new Error(`sign-in failed: ${JSON.stringify(answer)}`);
    return answer.token;
  }

  async createUser(token: string, username: string, role: string): Promise<void> {
    const answer = await this.post("/portaladmin/security/users/createUser", {
      username,
      password: `pw-${username}-secret`,
      firstname: "Bench",
      lastname: username,
      email: `${username}@example.com`,
      role,
      token,
    });
    if (answer.success !== true) throw new Error(`createUser ${username} failed: ${JSON.stringify(answer)}`);
  }

  /** The raw body of a GET, so the baseline can serve exactly these bytes. */
  async getText(path: string, params: Record<string, string>): Promise<string> {
    const res = await fetch(`${this.origin}${path}?${new URLSearchParams({ f: "json", ...params })}`);
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${text.slice(0, 200)}`);
    return text;
  }

  private async post(path: string, params: Record<string, string>): Promise<any> {
    const res = await fetch(`${this.origin}${path}`, {
      method: "POST",
      body: new URLSearchParams({ f: "json", ...params }),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`POST ${path}: HTTP ${res.status}: ${text.slice(0, 200)}`);
    return JSON.parse(text);
  }
}
