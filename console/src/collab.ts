/**
 * Distributed collaboration, end to end through the console: create, invite (the invitation file
 * is downloaded), accept an invitation by upload, export and import the response, link groups,
 * sync and watch its progress and per-item results, schedules, and ending participation.
 */

import { api, download } from "./core.js";
import {
  act,
  alive,
  button,
  field,
  formOf,
  h,
  link,
  messageArea,
  page,
  say,
  showOk,
  table,
  values,
  when,
} from "./ui.js";

const base = "/portals/self/collaborations";
const MODES = ["sendAndReceive", "send", "receive"];

async function groupChoices(): Promise<{ id: string; title: string }[]> {
  const found = await api("/community/groups", { q: "*", num: 100, sortField: "title" });
  return (found.results as any[]).map((g) => ({ id: g.id, title: g.title }));
}

function groupSelect(label: string, name: string, groups: { id: string; title: string }[]): HTMLElement {
  const id = `sel-${name}-${Math.random().toString(36).slice(2, 8)}`;
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    h(
      "select",
      { id, name },
      h("option", { value: "" }, "—"),
      ...groups.map((g) => h("option", { value: g.id }, g.title)),
    ),
  );
}

function fileField(label: string, name: string): HTMLElement {
  const id = `file-${name}`;
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    h("input", { id, name, type: "file", accept: "application/json,.json", required: true }),
  );
}

const fileOf = (f: HTMLFormElement, name: string) =>
  (f.elements.namedItem(name) as HTMLInputElement).files?.[0];

export async function collaborationsPage(): Promise<void> {
  const live = alive();
  const [list, groups] = await Promise.all([
    api(`${base.replace("/collaborations", "")}/collaborations`),
    groupChoices(),
  ]);
  const create = formOf(
    "New collaboration (this portal hosts it)",
    [
      field("Name", "name", { required: true }),
      field("Description", "description"),
      field("Workspace name", "workspaceName", { required: true }),
      groupSelect("Group linked to the workspace", "portalGroupId", groups),
      field("This portal's access mode", "accessMode", { choices: MODES, value: "sendAndReceive" }),
      field("Contact first name", "hostContactFirstname", { required: true }),
      field("Contact last name", "hostContactLastname", { required: true }),
      field("Contact e-mail", "hostContactEmailAddress", { type: "email", required: true }),
    ],
    "Create collaboration",
    async (f, a) => {
      let id = "";
      if (
        await act(a, async () => {
          id = (await api("/portals/self/createCollaboration", values(f))).collaboration.id;
        })
      ) {
        location.hash = `#/collaborations/${id}`;
      }
    },
  );
  const accept = formOf(
    "Accept an invitation (this portal joins as a guest)",
    [
      fileField("Invitation file", "invitationFile"),
      field("Contact first name", "guestContactFirstname", { required: true }),
      field("Contact last name", "guestContactLastname", { required: true }),
      field("Contact e-mail", "guestContactEmailAddress", { type: "email", required: true }),
    ],
    "Accept invitation",
    async (f, a) => {
      const file = fileOf(f, "invitationFile");
      if (!file) return;
      const contact = values(f);
      let id = "";
      const done = await act(a, async () => {
        const checked = await api(
          "/portals/self/validateCollaborationInvitation",
          {},
          { invitationFile: file },
        );
        say(`Invitation valid: ${checked.collaboration?.name ?? ""}`);
        const r = await api("/portals/self/acceptCollaborationInvitation", contact, { invitationFile: file });
        id = r.collaborationId ?? r.collaboration?.id ?? "";
      });
      if (done) location.hash = id ? `#/collaborations/${id}` : "#/collaborations";
    },
  );
  if (!live()) return;
  page(
    "Collaboration",
    table(
      "Collaborations of this portal",
      [
        { title: "Name", cell: (c: any) => link(`#/collaborations/${c.id}`, c.name) },
        { title: "Role", cell: (c: any) => (c.isHost ? "host" : "guest") },
        { title: "Status", cell: (c: any) => c.status ?? "" },
        { title: "Participants", cell: (c: any) => String(c.participantCount ?? "") },
      ],
      (list.collaborations as any[]) ?? [],
    ),
    create,
    accept,
  );
}

export async function collaborationPage(id: string): Promise<void> {
  const live = alive();
  const one = `${base}/${id}`;
  const [c, participants, workspaces, groups] = await Promise.all([
    api(one),
    api(`${one}/participants`),
    api(`${one}/workspaces`),
    groupChoices(),
  ]);
  const area = messageArea();
  const reload = () => collaborationPage(id);
  const ws = (workspaces.workspaces as any[]) ?? [];
  const parts: (HTMLElement | null)[] = [];
  parts.push(
    h(
      "p",
      {},
      `${c.isHost ? "This portal hosts it" : "This portal is a guest"}; status ${c.status ?? "active"}. ${c.description ?? ""}`,
    ),
  );
  parts.push(
    table(
      "Participants",
      [
        { title: "Portal", cell: (p: any) => p.portalName ?? p.portalUrl },
        { title: "URL", cell: (p: any) => p.portalUrl },
        { title: "Role", cell: (p: any) => p.role },
        { title: "Status", cell: (p: any) => p.status },
        { title: "Key", cell: (p: any) => (p.keyFingerprint ?? "").slice(0, 16) },
      ],
      (participants.participants as any[]) ?? [],
    ),
  );
  if (c.isHost) {
    parts.push(
      formOf(
        "Invite a portal",
        [
          field("Guest portal URL", "guestPortalUrl", {
            type: "url",
            required: true,
            placeholder: "https://gis.example.org/portal",
          }),
          ...ws.map((w) =>
            field(`Its access mode in ${w.name}`, `mode-${w.id}`, {
              choices: MODES,
              value: "sendAndReceive",
            }),
          ),
          field("Valid for (hours)", "expiration", { value: "72" }),
        ],
        "Invite and download the invitation file",
        async (f, a) => {
          const v = values(f);
          const modes = Object.fromEntries(ws.map((w) => [w.id, v[`mode-${w.id}`] ?? "sendAndReceive"]));
          await act(a, async () => {
            const invitation = await api(`${one}/inviteParticipant`, {
              guestPortalUrl: v.guestPortalUrl,
              collaborationWorkspacesParticipantConfigJSON: JSON.stringify([modes]),
              expiration: v.expiration,
            });
            download(`collaboration-invitation-${invitation.invitationId ?? id}.json`, invitation);
            showOk(a, "Invitation made: send the downloaded file to the guest portal's administrator.");
          });
        },
      ),
      formOf(
        "Import a guest's response",
        [fileField("Response file", "invitationResponseFile")],
        "Import response",
        async (f, a) => {
          const file = fileOf(f, "invitationResponseFile");
          if (!file) return;
          if (
            await act(a, async () => {
              await api(`${one}/validateInvitationResponse`, {}, { invitationResponseFile: file });
              await api(`${one}/importInvitationResponse`, {}, { invitationResponseFile: file });
            })
          ) {
            await reload();
            say("Response imported: the guest is a participant.");
          }
        },
      ),
    );
  } else {
    parts.push(
      h(
        "div",
        { class: "actions" },
        button("Export the response file", () =>
          act(area, async () => {
            const response = await api(`${one}/exportInvitationResponse`);
            download(`collaboration-response-${id}.json`, response);
            showOk(area, "Response exported: send the downloaded file to the host's administrator.");
          }),
        ),
      ),
    );
  }
  for (const w of ws) parts.push(await workspaceSection(one, w, groups, c.isHost, area));
  parts.push(
    h(
      "div",
      { class: "actions danger" },
      c.isHost
        ? button("Delete the collaboration (for every participant)", () =>
            act(area, () => api(`${one}/delete`)).then((done) => {
              if (done) location.hash = "#/collaborations";
            }),
          )
        : button("End this portal's participation", () =>
            act(area, () => api(`${one}/removeParticipation`)).then((done) => {
              if (done) location.hash = "#/collaborations";
            }),
          ),
    ),
  );
  if (!live()) return;
  page(
    `Collaboration: ${c.name}`,
    ...parts,
    area,
    h("p", {}, link("#/collaborations", "All collaborations")),
  );
}

async function workspaceSection(
  one: string,
  w: any,
  groups: { id: string; title: string }[],
  isHost: boolean,
  area: HTMLElement,
): Promise<HTMLElement> {
  const wsPath = `${one}/workspaces/${w.id}`;
  const links = (w.participantGroupLinks as any[]) ?? [];
  const mine = links.find((l) => l.portalGroupId);
  const section = h(
    "section",
    { class: "workspace", "aria-label": `Workspace ${w.name}` },
    h("h2", {}, `Workspace: ${w.name}`),
  );
  section.append(
    h(
      "p",
      {},
      `Last successful sync: ${when(w.lastSyncSuccess)}. Linked group here: ${mine ? (groups.find((g) => g.id === mine.portalGroupId)?.title ?? mine.portalGroupId) : "none"}.`,
    ),
    formOf(
      `Link a group of this portal to ${w.name}`,
      [
        groupSelect("Group", "portalGroupId", groups),
        field("Realtime sync", "enableRealtimeSync", {
          choices: ["false", "true"],
          value: mine?.enableRealtimeSync ? "true" : "false",
        }),
        field("Copy feature data", "copyFeatureServiceData", {
          choices: ["false", "true"],
          value: mine?.copyFeatureServiceData ? "true" : "false",
        }),
      ],
      "Link group",
      async (f, a) => {
        await act(a, () => api(`${wsPath}/updatePortalGroupLink`, values(f)), "Group linked.");
      },
    ),
  );
  if (!isHost) {
    const progress = h("div", { class: "sync-progress", role: "status", "aria-live": "polite" });
    section.append(
      h(
        "div",
        { class: "actions" },
        button(`Sync ${w.name} now`, () =>
          act(area, async () => {
            const started = await api(`${wsPath}/sync`, { async: true });
            await watchSync(wsPath, started.jobId, progress);
          }),
        ),
      ),
      progress,
    );
    section.append(await scheduleForm(wsPath, w.name));
  }
  const history = await api(`${wsPath}/syncStatus`).catch(() => ({ status: [] }));
  section.append(
    table(
      `Syncs of ${w.name}`,
      [
        { title: "Started", cell: (s: any) => when(s.startTime) },
        { title: "Ended", cell: (s: any) => when(s.endTime) },
        { title: "Kind", cell: (s: any) => s.syncExecType },
        { title: "Status", cell: (s: any) => s.status },
        { title: "Summary", cell: (s: any) => s.summary ?? "" },
      ],
      ((history.status as any[]) ?? []).slice(0, 10),
    ),
  );
  return section;
}

const RUNNING = new Set(["submitted", "started", "in_progress"]);

async function watchSync(wsPath: string, syncId: string, into: HTMLElement): Promise<void> {
  for (;;) {
    const s = await api(`${wsPath}/syncStatus/${syncId}`);
    into.replaceChildren(
      h("p", { class: "sync-state" }, `Sync ${syncId}: ${s.status}${s.summary ? ` — ${s.summary}` : ""}`),
      ...((s.participantTasks as any[]) ?? []).map((t) =>
        table(
          `${t.direction === "receive" ? "Received from" : "Sent to"} ${t.portalUrl}: ${t.status} (${t.succeededCount} succeeded, ${t.failedCount} failed, ${t.notProcessedCount} not processed)`,
          [
            { title: "Item", cell: (r: any) => r.title ?? r.id },
            { title: "Result", cell: (r: any) => r.result },
            { title: "Detail", cell: (r: any) => r.detail ?? "" },
          ],
          [
            ...((t.succeeded as any[]) ?? []).map((i) => ({ ...i, result: "succeeded", detail: i.action })),
            ...((t.failed as any[]) ?? []).map((i) => ({ ...i, result: "failed", detail: i.reason })),
            ...((t.notProcessed as any[]) ?? []).map((i) => ({
              ...i,
              result: "not processed",
              detail: i.reason,
            })),
          ],
        ),
      ),
    );
    if (!RUNNING.has(s.status)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function scheduleForm(wsPath: string, name: string): Promise<HTMLElement> {
  const current = await api(`${wsPath}/schedule`).catch(() => undefined);
  const state = h(
    "p",
    {},
    current?.state
      ? `Schedule: ${current.state}, every ${current.interval} h, next ${when(current.nextFireTime)}, fired ${current.fired}.`
      : "No schedule.",
  );
  const a = messageArea();
  const refresh = async () => {
    const s = await api(`${wsPath}/schedule`).catch(() => undefined);
    state.textContent = s?.state
      ? `Schedule: ${s.state}, every ${s.interval} h, next ${when(s.nextFireTime)}, fired ${s.fired}.`
      : "No schedule.";
  };
  const f = formOf(
    `Schedule the syncs of ${name}`,
    [
      field("Interval (hours)", "interval", { value: String(current?.interval ?? "24"), required: true }),
      field("Repeats after the first (-1: forever)", "repeatCount", {
        value: String(current?.repeatCount ?? "-1"),
      }),
    ],
    "Save schedule",
    async (form, area) => {
      if (await act(area, () => api(`${wsPath}/schedule/update`, values(form)), "Schedule saved."))
        await refresh();
    },
  );
  return h(
    "div",
    { class: "schedule" },
    state,
    f,
    h(
      "div",
      { class: "actions" },
      ...(["pause", "resume", "delete"] as const).map((op) =>
        button(`${op[0]?.toUpperCase()}${op.slice(1)} the schedule of ${name}`, () =>
          act(a, () => api(`${wsPath}/schedule/${op}`)).then((done) => done && void refresh()),
        ),
      ),
    ),
    a,
  );
}
