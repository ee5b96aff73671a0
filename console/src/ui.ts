/** Small DOM helpers: elements, tables, forms and messages, accessible by construction. */

import { ApiError } from "./core.js";

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((e: Event) => void)>;

export function h(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

let ids = 0;
export const uid = (prefix: string) => `${prefix}-${++ids}`;

/** Says something to screen readers and sighted users alike (the status region). */
export function say(text: string): void {
  const status = document.getElementById("status");
  if (status) status.textContent = text;
}

export const main = () => document.getElementById("main") as HTMLElement;

/** Replaces the page's content; the heading names the page. */
export function page(title: string, ...children: (Child | Child[])[]): HTMLElement {
  const m = main();
  m.replaceChildren(h("h1", {}, title), ...children.flat().filter((c): c is Node | string => !!c));
  document.title = `${title} · Portico console`;
  return m;
}

/** An area where the result or the error of an action is written. */
export function messageArea(): HTMLElement {
  return h("div", { class: "message", role: "alert", "aria-live": "assertive" });
}

export function showError(area: HTMLElement, err: unknown): void {
  area.className = "message error";
  area.textContent = err instanceof ApiError ? err.full : String(err instanceof Error ? err.message : err);
}

export function showOk(area: HTMLElement, text: string): void {
  area.className = "message ok";
  area.textContent = text;
}

/**
 * Runs an action from a button or form, showing its error (or success) in `area`. True when it
 * succeeded and the user is still on the page it was started from: callers reload that page on
 * true, and a reload that starts after the user has gone to another address would draw the old
 * page over the new one (its own `alive()` would be taken at the new address). That happened:
 * a webhook's Delete answered after a move to #/health, and the Webhooks page replaced Health.
 */
export async function act(area: HTMLElement, what: () => Promise<unknown>, done?: string): Promise<boolean> {
  const still = alive();
  area.className = "message";
  area.textContent = "";
  try {
    await what();
    if (done) showOk(area, done);
    return still();
  } catch (err) {
    showError(area, err);
    return false;
  }
}

export interface Column<T> {
  title: string;
  cell: (row: T) => Child | Child[];
}

export function table<T>(caption: string, columns: Column<T>[], rows: T[]): HTMLElement {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c.title)))),
      h(
        "tbody",
        {},
        rows.length === 0
          ? h("tr", {}, h("td", { colspan: columns.length }, "None."))
          : rows.map((r) => h("tr", {}, ...columns.map((c) => h("td", {}, c.cell(r))))),
      ),
    ),
  );
}

export function button(label: string, onclick: (e: Event) => void, attrs: Attrs = {}): HTMLElement {
  return h("button", { type: "button", onclick, ...attrs }, label);
}

/** A labelled field: input, select or textarea. */
export function field(
  label: string,
  name: string,
  options: {
    type?: string;
    value?: string;
    choices?: string[];
    multiline?: boolean;
    required?: boolean;
    hint?: string;
    placeholder?: string;
  } = {},
): HTMLElement {
  const id = uid(name.replace(/[^a-zA-Z0-9]/g, ""));
  const hintId = options.hint ? `${id}-hint` : undefined;
  let control: HTMLElement;
  const common = {
    id,
    name,
    required: options.required,
    "aria-describedby": hintId,
    placeholder: options.placeholder,
  };
  if (options.choices) {
    control = h(
      "select",
      common,
      ...options.choices.map((c) => h("option", { value: c, selected: c === options.value }, c || "—")),
    );
  } else if (options.multiline) {
    control = h("textarea", { ...common, rows: 3 }, options.value ?? "");
  } else {
    control = h("input", { ...common, type: options.type ?? "text", value: options.value });
  }
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    control,
    hintId ? h("small", { id: hintId }, options.hint) : null,
  );
}

/** The non-empty values of a form's named controls. */
export function values(f: HTMLFormElement): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of new FormData(f)) if (typeof v === "string" && v !== "") out[k] = v;
  return out;
}

export function formOf(
  legend: string,
  fields: HTMLElement[],
  submit: string,
  onsubmit: (f: HTMLFormElement, area: HTMLElement) => Promise<void>,
): HTMLElement {
  const area = messageArea();
  const f = h(
    "form",
    {},
    h("fieldset", {}, h("legend", {}, legend), ...fields),
    h("button", { type: "submit" }, submit),
    area,
  ) as HTMLFormElement;
  f.addEventListener("submit", (e) => {
    e.preventDefault();
    void onsubmit(f, area);
  });
  return f;
}

export const when = (ms: number | null | undefined) =>
  ms === null || ms === undefined || ms < 0 ? "—" : new Date(ms).toISOString().replace("T", " ").slice(0, 19);

export const link = (href: string, text: string) => h("a", { href }, text);

/**
 * Whether the page that called this is still the one asked for: a page's answers may arrive after
 * the user moved on (or after an action reloaded another page), and must not replace the newer one.
 */
export function alive(): () => boolean {
  const hash = location.hash;
  return () => location.hash === hash;
}
