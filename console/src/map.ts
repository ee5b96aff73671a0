/**
 * A hosted layer on a MapLibre map. With no basemap configured (the default) the map is the
 * features alone on a plain background, so it works offline; with an organization `defaultBasemap`
 * whose first layer is a tile service (ArcGIS `MapServer` tiles or a `{z}/{y}/{x}` template), its
 * tiles are shown underneath.
 */

import * as maplibregl from "maplibre-gl";
import { config } from "./core.js";

function basemapTiles(basemap: any): string | undefined {
  const first = basemap?.baseMapLayers?.[0];
  const url: string | undefined = first?.templateUrl ?? first?.url;
  if (typeof url !== "string" || !/^https?:\/\//.test(url)) return undefined;
  if (url.includes("{")) return url.replace("{level}", "{z}").replace("{row}", "{y}").replace("{col}", "{x}");
  return `${url.replace(/\/$/, "")}/tile/{z}/{y}/{x}`;
}

function boundsOf(geojson: any): [number, number, number, number] | undefined {
  let b: [number, number, number, number] | undefined;
  const visit = (c: any): void => {
    if (typeof c[0] === "number") {
      const [x, y] = c as [number, number];
      b = b ? [Math.min(b[0], x), Math.min(b[1], y), Math.max(b[2], x), Math.max(b[3], y)] : [x, y, x, y];
    } else for (const d of c) visit(d);
  };
  for (const f of geojson.features ?? []) if (f.geometry?.coordinates) visit(f.geometry.coordinates);
  return b;
}

export async function showMap(container: HTMLElement, geojson: any, basemap: unknown): Promise<void> {
  maplibregl.setWorkerUrl(`${config.base}/assets/maplibre-gl-worker.mjs`);
  const tiles = basemapTiles(basemap);
  const map = new maplibregl.Map({
    container,
    attributionControl: false,
    style: {
      version: 8,
      sources: {
        features: { type: "geojson", data: geojson },
        ...(tiles ? { basemap: { type: "raster", tiles: [tiles], tileSize: 256 } } : {}),
      },
      layers: [
        { id: "background", type: "background", paint: { "background-color": "#eef2f5" } },
        ...(tiles ? [{ id: "basemap", type: "raster" as const, source: "basemap" }] : []),
        {
          id: "fill",
          type: "fill",
          source: "features",
          filter: ["==", ["geometry-type"], "Polygon"],
          paint: { "fill-color": "#007ac2", "fill-opacity": 0.35, "fill-outline-color": "#005e95" },
        },
        {
          id: "line",
          type: "line",
          source: "features",
          filter: ["==", ["geometry-type"], "LineString"],
          paint: { "line-color": "#005e95", "line-width": 2 },
        },
        {
          id: "point",
          type: "circle",
          source: "features",
          filter: ["==", ["geometry-type"], "Point"],
          paint: {
            "circle-color": "#007ac2",
            "circle-radius": 5,
            "circle-stroke-color": "#ffffff",
            "circle-stroke-width": 1.5,
          },
        },
      ],
    },
  });
  map.addControl(new maplibregl.NavigationControl({}), "top-right");
  const b = boundsOf(geojson);
  if (b) map.fitBounds(b, { padding: 40, maxZoom: 16, animate: false });
  await new Promise<void>((resolve) => map.once("idle", () => resolve()));
  container.dataset.state = "ready";
  container.dataset.features = String((geojson.features ?? []).length);
}
