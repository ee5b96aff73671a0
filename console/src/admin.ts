/** Organization settings, security policy and lockouts, users, roles, groups. */

import { api, config } from "./core.js";
import {
  act,
  alive,
  button,
  type Column,
  field,
  formOf,
  h,
  link,
  messageArea,
  page,
  say,
  showError,
  showOk,
  table,
  values,
  when,
} from "./ui.js";

export interface Meta {
  settings: { name: string; group: string; kind: string; helperKey?: string; choices?: string[] }[];
  privileges: string[];
  passwordRules: string[];
  lockoutRules: string[];
}

let meta: Meta | undefined;
export async function loadMeta(): Promise<Meta> {
  meta ??= (await (await fetch(`${config.base}/assets/meta.json`)).json()) as Meta;
  return meta;
}

/** ArcGIS's Organization > Settings sections, for the settings of the `website` group. */
const SECTIONS: Record<string, string[]> = {
  General: [],
  "Home page": [
    "featuredItemsGroupQuery",
    "homePageFeaturedContent",
    "homePageFeaturedContentCount",
    "featuredGroups",
    "rotatorPanels",
    "showHomePageDescription",
    "backgroundImage",
  ],
  Map: [
    "basemapGalleryGroupQuery",
    "defaultBasemap",
    "defaultExtent",
    "useVectorBasemaps",
    "vendorKey",
    "templatesGroupQuery",
    "layerTemplatesGroupQuery",
    "symbolSetsGroupQuery",
    "colorSetsGroupQuery",
    "analysisLayersGroupQuery",
    "stylesGroupQuery",
    "2DStylesGroupQuery",
  ],
  Items: ["metadataEditable", "metadataFormats"],
  Credits: ["defaultUserCreditAssignment", "creditAssignments"],
};

function sectionOf(s: Meta["settings"][number]): string {
  if (s.group === "security") return "Security";
  if (s.group === "utilityServices") return "Utility services";
  return Object.entries(SECTIONS).find(([, names]) => names.includes(s.name))?.[0] ?? "General";
}

const shown = (v: unknown) =>
  v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);

export async function orgPage(): Promise<void> {
  const live = alive();
  const [{ settings }, self] = await Promise.all([loadMeta(), api("/portals/self")]);
  const sections = new Map<string, HTMLElement[]>();
  const initial = new Map<string, string>();
  for (const s of settings) {
    const current = s.helperKey ? self.helperServices?.[s.helperKey] : self[s.name];
    const value = shown(current);
    initial.set(s.name, value);
    const f =
      s.kind === "boolean"
        ? field(s.name, s.name, { value, choices: ["", "true", "false"] })
        : s.choices
          ? field(s.name, s.name, { value, choices: ["", ...s.choices] })
          : field(s.name, s.name, {
              value,
              multiline: s.kind === "json",
              type: s.kind === "integer" ? "text" : "text",
              hint: s.kind === "json" ? "JSON" : undefined,
            });
    const name = sectionOf(s);
    sections.set(name, [...(sections.get(name) ?? []), f]);
  }
  const area = messageArea();
  const form = h(
    "form",
    { class: "settings" },
    ...[...sections].map(([name, fields]) =>
      h("fieldset", {}, h("legend", {}, name), h("div", { class: "grid" }, ...fields)),
    ),
    h("button", { type: "submit" }, "Save changed settings"),
    area,
  ) as HTMLFormElement;
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const changed: Record<string, string> = {};
    for (const [k, v] of new FormData(form)) {
      if (typeof v === "string" && v !== initial.get(k)) changed[k] = v;
    }
    if (Object.keys(changed).length === 0) {
      showOk(area, "Nothing changed.");
      return;
    }
    void act(
      area,
      async () => {
        await api("/portals/self/update", changed);
        for (const [k, v] of Object.entries(changed)) initial.set(k, v);
      },
      `Saved: ${Object.keys(changed).join(", ")}.`,
    );
  });
  if (!live()) return;
  page(
    "Organization settings",
    h(
      "p",
      {},
      "Every parameter of the organization update, grouped as ArcGIS groups them. Only changed fields are sent; an empty field is sent empty (cleared).",
    ),
    form,
  );
}

export async function securityPage(): Promise<void> {
  const live = alive();
  const [m, policy, users] = await Promise.all([
    loadMeta(),
    api("/portals/self/securityPolicy"),
    api("/portals/self/users", { num: 100 }),
  ]);
  const pw = policy.passwordPolicy as Record<string, unknown>;
  const lock = policy.lockoutPolicy as Record<string, unknown>;
  const policyForm = formOf(
    "Password and lockout policy",
    [
      ...m.passwordRules.map((r) => field(r, r, { value: shown(pw[r]) })),
      ...m.lockoutRules.map((r) => field(r, r, { value: shown(lock[r]) })),
    ],
    "Save policy",
    async (f, area) => {
      const params: Record<string, string> = {};
      for (const [k, v] of new FormData(f)) if (typeof v === "string") params[k] = v;
      await act(area, () => api("/portals/self/securityPolicy/update", params), "Security policy saved.");
    },
  );
  const resetArea = messageArea();
  const reset = button("Reset to the defaults", () => {
    void act(resetArea, () => api("/portals/self/securityPolicy/reset"), "Policy reset.").then(
      (done) => done && void securityPage(),
    );
  });
  const lockArea = messageArea();
  const rows = (users.users as any[]) ?? [];
  if (!live()) return;
  page(
    "Security",
    h("p", {}, `Password policy: ${pw.type === "custom" ? "custom" : "default"}.`),
    policyForm,
    h("div", { class: "actions" }, reset, resetArea),
    h("h2", {}, "Account lockout"),
    table(
      "Accounts and their lockout state",
      [
        { title: "Username", cell: (u: any) => u.username },
        { title: "Locked", cell: (u: any) => (u.locked ? "locked" : "no") },
        { title: "Locked until", cell: (u: any) => when(u.lockedUntil) },
        { title: "Failed attempts", cell: (u: any) => String(u.failedLoginAttempts ?? 0) },
        {
          title: "Action",
          cell: (u: any) =>
            u.locked
              ? button(`Unlock ${u.username}`, () =>
                  act(lockArea, () => api(`/community/users/${encodeURIComponent(u.username)}/enable`)).then(
                    (done) => done && void securityPage().then(() => say(`${u.username} unlocked.`)),
                  ),
                )
              : "",
        },
      ],
      rows,
    ),
    lockArea,
  );
}

export async function usersPage(start = 1): Promise<void> {
  const live = alive();
  const [list, roles] = await Promise.all([
    api("/portals/self/users", { start, num: 25 }),
    api("/portals/self/roles", { num: 100 }),
  ]);
  const roleChoices = ["org_user", "org_publisher", "org_admin", ...(roles.roles as any[]).map((r) => r.id)];
  const roleName = (id: string) => (roles.roles as any[]).find((r) => r.id === id)?.name ?? id;
  const area = messageArea();
  const reload = () => usersPage(start);
  const columns: Column<any>[] = [
    { title: "Username", cell: (u) => u.username },
    { title: "Name", cell: (u) => u.fullName ?? "" },
    { title: "Role", cell: (u) => roleName(u.roleId ?? u.role) },
    { title: "Status", cell: (u) => (u.disabled ? "disabled" : u.locked ? "locked" : "active") },
    {
      title: "Change role",
      cell: (u) => {
        const id = `role-${u.username}`;
        const select = h(
          "select",
          { id, "aria-label": `Role of ${u.username}` },
          ...roleChoices.map((r) =>
            h("option", { value: r, selected: r === (u.roleId ?? u.role) }, roleName(r)),
          ),
        ) as HTMLSelectElement;
        return h(
          "span",
          { class: "inline" },
          select,
          button(`Set role of ${u.username}`, () =>
            act(
              area,
              () => api("/portals/self/updateUserRole", { user: u.username, role: select.value }),
              `Role of ${u.username} set.`,
            ),
          ),
        );
      },
    },
    {
      title: "Actions",
      cell: (u) =>
        h(
          "span",
          { class: "inline" },
          button(u.disabled ? `Enable ${u.username}` : `Disable ${u.username}`, () =>
            act(area, () =>
              api(`/community/users/${encodeURIComponent(u.username)}/${u.disabled ? "enable" : "disable"}`),
            ).then((done) => done && void reload()),
          ),
          button(`Delete ${u.username}`, () =>
            act(area, () => api(`/community/users/${encodeURIComponent(u.username)}/delete`)).then(
              (done) => done && void reload(),
            ),
          ),
        ),
    },
  ];
  const create = formOf(
    "New user",
    [
      field("Username", "username", { required: true }),
      field("Password", "password", { type: "password", required: true }),
      field("First name", "firstname", { required: true }),
      field("Last name", "lastname", { required: true }),
      field("E-mail", "email", { type: "email", required: true }),
      field("Role", "role", { choices: roleChoices, value: "org_user" }),
    ],
    "Create user",
    async (f, a) => {
      if (await act(a, () => api(`${config.portal}/portaladmin/security/users/createUser`, values(f)))) {
        await reload();
        say("User created.");
      }
    },
  );
  if (!live()) return;
  page(
    "Users",
    table(`Members (${list.total})`, columns, list.users as any[]),
    pager(list, (s) => usersPage(s)),
    area,
    create,
  );
}

/** Previous and next buttons over a paged answer (`start`, `num`, `total`, `nextStart`). */
export function pager(list: any, go: (start: number) => void): HTMLElement {
  const start = Number(list.start ?? 1);
  const num = Number(list.num ?? 10);
  return h(
    "div",
    { class: "pager" },
    button("Previous page", () => go(Math.max(1, start - num)), { disabled: start <= 1 }),
    h("span", {}, `${start}–${Math.min(list.total, start + num - 1)} of ${list.total}`),
    button("Next page", () => go(list.nextStart), { disabled: !(list.nextStart > 0) }),
  );
}

export async function rolesPage(): Promise<void> {
  const live = alive();
  const [m, roles] = await Promise.all([
    loadMeta(),
    api("/portals/self/roles", { num: 100, returnPrivileges: true }),
  ]);
  const area = messageArea();
  const list = roles.roles as any[];
  const create = formOf(
    "New custom role",
    [field("Name", "name", { required: true }), field("Description", "description")],
    "Create role",
    async (f, a) => {
      if (await act(a, () => api("/portals/self/createRole", values(f)))) await rolesPage();
    },
  );
  const editors = list.map((role) => {
    const held = new Set((role.privileges as string[] | undefined) ?? []);
    const boxes = m.privileges.map((p) => {
      const id = `priv-${role.id}-${p.replace(/[^a-zA-Z0-9]/g, "_")}`;
      return h(
        "div",
        { class: "check" },
        h("input", { type: "checkbox", id, name: "privilege", value: p, checked: held.has(p) }),
        h("label", { for: id }, p),
      );
    });
    const a = messageArea();
    const f = h(
      "form",
      {},
      h("fieldset", { class: "privileges" }, h("legend", {}, `Privileges of ${role.name}`), ...boxes),
      h("button", { type: "submit" }, `Save privileges of ${role.name}`),
      button(`Delete role ${role.name}`, () =>
        act(a, () => api(`/portals/self/roles/${role.id}/delete`)).then((done) => done && void rolesPage()),
      ),
      a,
    ) as HTMLFormElement;
    f.addEventListener("submit", (e) => {
      e.preventDefault();
      const privileges = new FormData(f).getAll("privilege").map(String);
      void act(
        a,
        () =>
          api(`/portals/self/roles/${role.id}/setPrivileges`, { privileges: JSON.stringify({ privileges }) }),
        `Privileges of ${role.name} saved (${privileges.length}).`,
      );
    });
    return h("details", {}, h("summary", {}, `${role.name} — ${role.description ?? ""}`), f);
  });
  if (!live()) return;
  page(
    "Roles",
    h("p", {}, "Built-in roles: org_admin, org_publisher, org_user. Custom roles and their privileges:"),
    ...editors,
    area,
    create,
  );
}

export async function groupsPage(): Promise<void> {
  const live = alive();
  const found = await api("/community/groups", { q: "*", num: 100, sortField: "title" });
  const area = messageArea();
  const create = formOf(
    "New group",
    [
      field("Title", "title", { required: true }),
      field("Access", "access", { choices: ["private", "org", "public"], value: "org" }),
      field("Tags", "tags"),
    ],
    "Create group",
    async (f, a) => {
      if (await act(a, () => api("/community/createGroup", values(f)))) await groupsPage();
    },
  );
  if (!live()) return;
  page(
    "Groups",
    table(
      "Groups",
      [
        { title: "Title", cell: (g: any) => link(`#/groups/${g.id}`, g.title) },
        { title: "Owner", cell: (g: any) => g.owner },
        { title: "Access", cell: (g: any) => g.access },
      ],
      found.results as any[],
    ),
    area,
    create,
  );
}

export async function groupPage(id: string): Promise<void> {
  const live = alive();
  const [group, members] = await Promise.all([
    api(`/community/groups/${id}`),
    api(`/community/groups/${id}/users`),
  ]);
  const area = messageArea();
  const rows = [
    { username: members.owner, kind: "owner" },
    ...(members.admins as string[])
      .filter((u) => u !== members.owner)
      .map((u) => ({ username: u, kind: "manager" })),
    ...(members.users as string[]).map((u) => ({ username: u, kind: "member" })),
  ];
  const add = formOf(
    "Add members",
    [field("Usernames (comma-separated)", "users", { required: true })],
    "Add to group",
    async (f, a) => {
      const r = await act(a, async () => {
        const answer = await api(`/community/groups/${id}/addUsers`, values(f));
        if ((answer.notAdded as string[] | undefined)?.length) {
          throw new Error(`Not added: ${answer.notAdded.join(", ")}`);
        }
      });
      if (r) await groupPage(id);
    },
  );
  if (!live()) return;
  page(
    `Group: ${group.title}`,
    h("p", {}, `Access: ${group.access}. Owner: ${group.owner}.`),
    table(
      "Members",
      [
        { title: "Username", cell: (r: any) => r.username },
        { title: "Membership", cell: (r: any) => r.kind },
        {
          title: "Action",
          cell: (r: any) =>
            r.kind === "owner"
              ? ""
              : button(`Remove ${r.username}`, () =>
                  act(area, () => api(`/community/groups/${id}/removeUsers`, { users: r.username })).then(
                    (done) => done && void groupPage(id),
                  ),
                ),
        },
      ],
      rows,
    ),
    area,
    add,
    h("p", {}, link("#/groups", "All groups")),
  );
}

export function showFailure(err: unknown): void {
  const area = messageArea();
  showError(area, err);
  page("Something went wrong", area);
}
