/** Webhooks, and the node's health, readiness and metrics. */

import { api, config } from "./core.js";
import { act, alive, button, field, formOf, h, link, messageArea, page, table, values, when } from "./ui.js";

export async function webhooksPage(): Promise<void> {
  const live = alive();
  const list = await api("/portals/self/webhooks", { num: 100 });
  const area = messageArea();
  const reload = () => webhooksPage();
  const create = formOf(
    "New webhook",
    [
      field("Name", "name", { required: true }),
      field("Payload URL", "url", { type: "url", required: true }),
      field("Changes", "changes", { choices: ["allChanges", "manualChanges"], value: "allChanges" }),
      field("Events (for manualChanges)", "events", { placeholder: "/items,/groups" }),
      field("Secret (optional)", "secret", {
        type: "password",
        hint: "Signs every delivery; never shown again.",
      }),
    ],
    "Create webhook",
    async (f, a) => {
      if (await act(a, () => api("/portals/self/webhooks/createWebhook", values(f)))) await reload();
    },
  );
  if (!live()) return;
  page(
    "Webhooks",
    table(
      "Webhooks",
      [
        { title: "Name", cell: (w: any) => link(`#/webhooks/${w.id}`, w.name) },
        { title: "Payload URL", cell: (w: any) => w.payloadUrl },
        { title: "State", cell: (w: any) => (w.isActive ? "active" : "inactive") },
        {
          title: "Changes",
          cell: (w: any) => (w.changes === "allChanges" ? "all" : (w.events as string[]).join(", ")),
        },
        {
          title: "Actions",
          cell: (w: any) =>
            h(
              "span",
              { class: "inline" },
              button(`Ping ${w.name}`, () =>
                act(area, () => api(`/portals/self/webhooks/${w.id}/ping`), `Ping of ${w.name} queued.`),
              ),
              button(w.isActive ? `Deactivate ${w.name}` : `Activate ${w.name}`, () =>
                act(area, () =>
                  api(`/portals/self/webhooks/${w.id}/${w.isActive ? "deactivate" : "activate"}`),
                ).then((done) => done && void reload()),
              ),
              button(`Delete ${w.name}`, () =>
                act(area, () => api(`/portals/self/webhooks/${w.id}/delete`)).then(
                  (done) => done && void reload(),
                ),
              ),
            ),
        },
      ],
      list.webhooks as any[],
    ),
    area,
    create,
  );
}

export async function webhookPage(id: string): Promise<void> {
  const live = alive();
  const [hook, status] = await Promise.all([
    api(`/portals/self/webhooks/${id}`),
    api(`/portals/self/webhooks/${id}/notificationStatus`, { num: 50 }),
  ]);
  const area = messageArea();
  const notifications = status.WebhookStatus as any[];
  if (!live()) return;
  page(
    `Webhook: ${hook.name}`,
    h(
      "p",
      {},
      `${hook.isActive ? "Active" : "Inactive"}; payload URL ${hook.payloadUrl}; ${hook.secret ? "signed (secret set)" : "unsigned"}.`,
    ),
    h(
      "div",
      { class: "actions" },
      button("Send a ping", () =>
        act(area, () => api(`/portals/self/webhooks/${id}/ping`)).then(
          (done) => done && void webhookPage(id),
        ),
      ),
      button("Refresh the delivery log", () => void webhookPage(id)),
      button("Redeliver every failure of the last day", () =>
        act(area, async () => {
          const r = await api(`/portals/self/webhooks/${id}/redeliver`, { since: Date.now() - 86_400_000 });
          area.textContent = `${r.redelivered} queued again.`;
        }),
      ),
    ),
    area,
    h("h2", {}, "Delivery log"),
    ...(notifications.length === 0
      ? [h("p", {}, "No notification yet.")]
      : notifications.map((n) =>
          h(
            "section",
            { class: "delivery", "aria-label": `Notification ${n.id}` },
            h(
              "h3",
              {},
              `${when(n.created)} — ${n.status}${n.payload?.events?.[0] ? ` — ${n.payload.events[0].source} ${n.payload.events[0].operation}` : ""}`,
            ),
            table(
              `Attempts of notification ${n.id}`,
              [
                { title: "Attempt", cell: (a: any) => String(a.attempt) },
                { title: "Started", cell: (a: any) => when(a.started) },
                { title: "Duration (ms)", cell: (a: any) => String(a.durationMs ?? "") },
                { title: "Status code", cell: (a: any) => String(a.statusCode ?? "") },
                { title: "Error", cell: (a: any) => a.error ?? "" },
                { title: "Answer", cell: (a: any) => (a.responseText ?? "").slice(0, 200) },
              ],
              n.attempts as any[],
            ),
            button(`Redeliver notification ${n.id}`, () =>
              act(area, () => api(`/portals/self/webhooks/${id}/redeliver`, { notificationId: n.id })).then(
                (done) => done && void webhookPage(id),
              ),
            ),
          ),
        )),
    h("p", {}, link("#/webhooks", "All webhooks")),
  );
}

/** The metrics shown, of the many `/metrics` exposes: name → label. */
const MAIN_METRICS: [RegExp, string][] = [
  [/^portico_http_requests_total\b/, "HTTP requests answered"],
  [/^portico_http_request_errors_total\b/, "Requests answered with an error"],
  [/^process_resident_memory_bytes\b/, "Resident memory (bytes)"],
  [/^process_cpu_seconds_total\b/, "CPU seconds"],
  [/^nodejs_eventloop_lag_p99_seconds\b/, "Event loop lag p99 (s)"],
  [/^portico_webhook_/, "Webhooks"],
  [/^portico_db_/, "Database"],
  [/^portico_sync/, "Collaboration syncs"],
  [/^portico_/, "Portico"],
];

export async function healthPage(): Promise<void> {
  const live = alive();
  const root = config.portal;
  const get = async (url: string) => {
    try {
      const res = await fetch(url, { credentials: "omit" });
      return { status: res.status, text: await res.text() };
    } catch (err) {
      return { status: 0, text: String(err) };
    }
  };
  const [health, ready, metrics] = await Promise.all([
    get(`${root}/health`),
    get(`${root}/ready`),
    get(`${new URL(root).origin}/metrics`),
  ]);
  let checks: [string, string][] = [];
  try {
    checks = Object.entries(JSON.parse(ready.text).checks ?? {}).map(([k, v]: [string, any]) => [
      k,
      v.ok ? "ok" : `not ok: ${v.detail ?? ""}`,
    ]);
  } catch {
    checks = [["ready", ready.text]];
  }
  const sums = new Map<string, number>();
  if (metrics.status === 200) {
    for (const line of metrics.text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m || m[1]?.endsWith("_bucket")) continue;
      sums.set(m[1] as string, (sums.get(m[1] as string) ?? 0) + Number(m[3]));
    }
  }
  const shown = [...sums].filter(([name]) => MAIN_METRICS.some(([re]) => re.test(name))).slice(0, 40);
  if (!live()) return;
  page(
    "Health",
    table(
      "Node",
      [
        { title: "Probe", cell: (r: [string, string]) => r[0] },
        { title: "Answer", cell: (r: [string, string]) => r[1] },
      ],
      [
        ["health", health.status === 200 ? "ok" : `HTTP ${health.status}`],
        ["ready", ready.status === 200 ? "ready" : `not ready (HTTP ${ready.status})`],
        ...checks,
      ],
    ),
    h("h2", {}, "Main metrics"),
    metrics.status === 200
      ? table(
          "Metrics of this node (summed over labels)",
          [
            { title: "Metric", cell: (r: [string, number]) => r[0] },
            { title: "Value", cell: (r: [string, number]) => String(Math.round(r[1] * 1000) / 1000) },
          ],
          shown,
        )
      : h("p", {}, `Metrics are not served to this browser: ${metrics.text.trim()}`),
  );
}
