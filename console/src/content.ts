/** Content: search, an item, and a hosted layer on a map with its fields and features. */

import { pager } from "./admin.js";
import { api } from "./core.js";
import { alive, button, h, link, messageArea, page, showError, table, when } from "./ui.js";

export async function contentPage(q = "", start = 1): Promise<void> {
  const live = alive();
  const found = await api("/search", {
    q: q || "*",
    start,
    num: 20,
    sortField: "modified",
    sortOrder: "desc",
  });
  const input = h("input", { id: "content-q", type: "search", value: q, name: "q" }) as HTMLInputElement;
  const search = h(
    "form",
    { role: "search", class: "inline" },
    h("label", { for: "content-q" }, "Search content"),
    input,
    h("button", { type: "submit" }, "Search"),
  );
  search.addEventListener("submit", (e) => {
    e.preventDefault();
    void contentPage(input.value, 1);
  });
  if (!live()) return;
  page(
    "Content",
    search,
    table(
      `Items (${found.total})`,
      [
        { title: "Title", cell: (i: any) => link(`#/items/${i.id}`, i.title) },
        { title: "Type", cell: (i: any) => i.type },
        { title: "Owner", cell: (i: any) => i.owner },
        { title: "Modified", cell: (i: any) => when(i.modified) },
      ],
      found.results as any[],
    ),
    pager(found, (s) => contentPage(q, s)),
  );
}

export async function itemPage(id: string): Promise<void> {
  const live = alive();
  const item = await api(`/content/items/${id}`);
  const layers: any[] = [];
  if (item.url && /FeatureServer\/?$/.test(item.url)) {
    const service = await api(item.url).catch(() => ({ layers: [] }));
    layers.push(...((service.layers as any[]) ?? []), ...((service.tables as any[]) ?? []));
  }
  if (!live()) return;
  page(
    item.title,
    h(
      "dl",
      { class: "props" },
      ...[
        ["Type", item.type],
        ["Owner", item.owner],
        ["Access", item.access],
        ["Created", when(item.created)],
        ["Modified", when(item.modified)],
        ["Tags", (item.tags ?? []).join(", ")],
        ["URL", item.url ?? "—"],
      ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]),
    ),
    item.snippet ? h("p", {}, item.snippet) : null,
    layers.length
      ? table(
          "Layers",
          [
            { title: "Layer", cell: (l: any) => link(`#/items/${id}/layers/${l.id}`, `${l.id}: ${l.name}`) },
            { title: "Geometry", cell: (l: any) => l.geometryType ?? "table" },
          ],
          layers,
        )
      : null,
    h("p", {}, link("#/content", "All content")),
  );
}

const PAGE_SIZE = 25;

export async function layerPage(itemId: string, layerId: string): Promise<void> {
  const live = alive();
  const item = await api(`/content/items/${itemId}`);
  const url = `${String(item.url).replace(/\/$/, "")}/${layerId}`;
  const [layer, count] = await Promise.all([
    api(url),
    api(`${url}/query`, { where: "1=1", returnCountOnly: true }),
  ]);
  const fields = (layer.fields as any[]) ?? [];
  const mapBox = h("div", { id: "map", class: "map", role: "region", "aria-label": `Map of ${layer.name}` });
  const tableBox = h("div", {});
  const area = messageArea();
  if (!live()) return;
  page(
    `${item.title} — ${layer.name}`,
    layer.geometryType ? mapBox : h("p", {}, "This layer is a table: it has no map."),
    area,
    table(
      "Fields",
      [
        { title: "Name", cell: (f: any) => f.name },
        { title: "Alias", cell: (f: any) => f.alias ?? "" },
        { title: "Type", cell: (f: any) => f.type },
        { title: "Nullable", cell: (f: any) => (f.nullable === false ? "no" : "yes") },
      ],
      fields,
    ),
    tableBox,
    h("p", {}, link(`#/items/${itemId}`, "Back to the item")),
  );
  const total = Number(count.count ?? 0);
  const showRows = async (offset: number) => {
    try {
      const rows = await api(`${url}/query`, {
        where: "1=1",
        outFields: "*",
        returnGeometry: false,
        resultOffset: offset,
        resultRecordCount: PAGE_SIZE,
        orderByFields: layer.objectIdField ?? "",
      });
      const features = (rows.features as any[]) ?? [];
      tableBox.replaceChildren(
        table(
          `Features ${total === 0 ? 0 : offset + 1}–${Math.min(total, offset + features.length)} of ${total}`,
          fields.map((f) => ({
            title: f.alias ?? f.name,
            cell: (r: any) => {
              const v = r.attributes?.[f.name];
              return v === null || v === undefined
                ? ""
                : f.type === "esriFieldTypeDate"
                  ? when(v)
                  : String(v);
            },
          })),
          features,
        ),
        h(
          "div",
          { class: "pager" },
          button("Previous features", () => void showRows(Math.max(0, offset - PAGE_SIZE)), {
            disabled: offset === 0,
          }),
          button("Next features", () => void showRows(offset + PAGE_SIZE), {
            disabled: offset + PAGE_SIZE >= total,
          }),
        ),
      );
    } catch (err) {
      showError(area, err);
    }
  };
  await showRows(0);
  if (layer.geometryType) {
    try {
      const geojson = await api(`${url}/query`, {
        where: "1=1",
        outFields: layer.objectIdField ?? "*",
        outSR: 4326,
        f: "geojson",
        resultRecordCount: 2000,
      });
      const self = await api("/portals/self");
      const { showMap } = await import("./map.js");
      await showMap(mapBox, geojson, self.defaultBasemap);
    } catch (err) {
      showError(area, err);
    }
  }
}
