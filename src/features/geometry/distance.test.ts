import { describe, expect, it } from "vitest";
import { bufferQueryGeometry, toLinearUnits } from "./distance.js";
import type { Geometry } from "./esri-json.js";
import { type ResolvedReference, resolveSpatialReference, wrapRange } from "./projection.js";
import { prepareFilter } from "./relate.js";

function sr(wkid: number): ResolvedReference {
  const result = resolveSpatialReference({ wkid });
  if (!result.ok) throw new Error(result.error.message);
  return result.value;
}

const point = (x: number, y: number, wkid?: number): Geometry => ({
  type: "esriGeometryPoint",
  hasZ: false,
  hasM: false,
  x,
  y,
  ...(wkid ? { spatialReference: { wkid } } : {}),
});

const A = 6378137;
const F = 1 / 298.257223563;
const E2 = F * (2 - F);
const rad = (degrees: number): number => (degrees * Math.PI) / 180;
const deg = (radians: number): number => (radians * 180) / Math.PI;

/** The WGS 84 meridian arc from the equator to latitude φ (Helmert's series, Snyder eq. 3-21). */
function meridianArc(latitude: number): number {
  const e4 = E2 * E2;
  const e6 = e4 * E2;
  const phi = rad(latitude);
  return (
    A *
    ((1 - E2 / 4 - (3 * e4) / 64 - (5 * e6) / 256) * phi -
      ((3 * E2) / 8 + (3 * e4) / 32 + (45 * e6) / 1024) * Math.sin(2 * phi) +
      ((15 * e4) / 256 + (45 * e6) / 1024) * Math.sin(4 * phi) -
      ((35 * e6) / 3072) * Math.sin(6 * phi))
  );
}

/** The latitude `meters` north of `latitude` along the meridian, by bisection on the arc length. */
function northOf(latitude: number, meters: number): number {
  const target = meridianArc(latitude) + meters;
  let low = latitude;
  let high = latitude + 1;
  for (let i = 0; i < 100; i += 1) {
    const mid = (low + high) / 2;
    if (meridianArc(mid) < target) low = mid;
    else high = mid;
  }
  return (low + high) / 2;
}

/** The longitude `meters` east along the parallel (radius N cos φ); over a kilometre it differs from the geodesic by micrometres. */
function eastOf(longitude: number, latitude: number, meters: number): number {
  const n = A / Math.sqrt(1 - E2 * Math.sin(rad(latitude)) ** 2);
  return longitude + deg(meters / (n * Math.cos(rad(latitude))));
}

/** Spherical Web Mercator, written out. */
const mercator = (longitude: number, latitude: number): [number, number] => [
  A * rad(longitude),
  A * Math.log(Math.tan(Math.PI / 4 + rad(latitude) / 2)),
];

function buffered(geometry: Geometry, meters: number, reference: ResolvedReference): Geometry {
  const result = bufferQueryGeometry(geometry, meters, reference);
  if (!result.ok) throw new Error(result.error.message);
  return result.value;
}

function inside(area: Geometry, reference: ResolvedReference) {
  const wrap = wrapRange(reference);
  const filter = prepareFilter(area, "esriSpatialRelIntersects", wrap ? { wrap } : {});
  return (x: number, y: number): boolean => filter(point(x, y));
}

describe("toLinearUnits", () => {
  it("converts ArcGIS's units to meters, meters by default, whatever the case", () => {
    expect(toLinearUnits(2)).toEqual({ ok: true, value: 2 });
    expect(toLinearUnits(2, "")).toEqual({ ok: true, value: 2 });
    expect(toLinearUnits(2, "esriSRUnit_Meter")).toEqual({ ok: true, value: 2 });
    expect(toLinearUnits(2, "esriSRUnit_Kilometer")).toEqual({ ok: true, value: 2000 });
    expect(toLinearUnits(1, "esriSRUnit_StatuteMile")).toEqual({ ok: true, value: 1609.344 });
    expect(toLinearUnits(10, "ESRISRUNIT_FOOT")).toEqual({ ok: true, value: 3.048 });
    expect(toLinearUnits(1, "esriSRUnit_NauticalMile")).toEqual({ ok: true, value: 1852 });
    // 6,080.20 US survey feet (1200/3937 m each), to the millimetre.
    const us = toLinearUnits(1, "esriSRUnit_USNauticalMile");
    expect(us.ok && us.value).toBeCloseTo((6080.2 * 1200) / 3937, 2);
  });

  it("refuses unknown units and negative or non-finite distances", () => {
    expect(toLinearUnits(1, "esriSRUnit_Furlong").ok).toBe(false);
    expect(toLinearUnits(-1).ok).toBe(false);
    expect(toLinearUnits(Number.NaN).ok).toBe(false);
  });
});

describe("bufferQueryGeometry", () => {
  it("buffers by meters on the ground in longitude/latitude (WGS 84, at 60° N)", () => {
    const wgs84 = sr(4326);
    const area = buffered(point(10, 60, 4326), 1000, wgs84);
    expect(area.spatialReference).toEqual({ wkid: 4326 });
    const contains = inside(area, wgs84);
    expect(contains(10, northOf(60, 999))).toBe(true);
    expect(contains(10, northOf(60, 1001))).toBe(false);
    expect(contains(eastOf(10, 60, 999), 60)).toBe(true);
    expect(contains(eastOf(10, 60, 1001), 60)).toBe(false);
    expect(contains(eastOf(10, 60, -999), 60)).toBe(true);
    expect(contains(eastOf(10, 60, -1001), 60)).toBe(false);
    // 1 km east is 0.018° of longitude but 0.009° of latitude here: a circle in degrees would be wrong.
    expect(contains(10, northOf(60, 1800))).toBe(false);
  });

  it("buffers by meters on the ground in Web Mercator, not by Mercator units (twice as long at 60° N)", () => {
    const webMercator = sr(3857);
    const [x, y] = mercator(10, 60);
    const contains = inside(buffered(point(x, y, 3857), 1000, webMercator), webMercator);
    const [, north999] = mercator(10, northOf(60, 999));
    const [, north1001] = mercator(10, northOf(60, 1001));
    expect(contains(x, north999)).toBe(true);
    expect(contains(x, north1001)).toBe(false);
    const [east999] = mercator(eastOf(10, 60, 999), 60);
    const [east1001] = mercator(eastOf(10, 60, 1001), 60);
    expect(contains(east999, y)).toBe(true);
    expect(contains(east1001, y)).toBe(false);
    // 1,900 Mercator units north are about 950 m on the ground at 60° N.
    expect(contains(x, y + 1900)).toBe(true);
  });

  it("buffers planar distances in a projected reference, in its own units", () => {
    const utm = sr(32633);
    const contains = inside(buffered(point(500000, 6650000), 1000, utm), utm);
    expect(contains(500000, 6650999)).toBe(true);
    expect(contains(500000, 6651001)).toBe(false);
    expect(contains(499001, 6650000)).toBe(true);
    expect(contains(498999, 6650000)).toBe(false);

    // NAD83 / New York Long Island in US survey feet: 1000 m = 3280.833 ftUS.
    const longIsland = sr(2263);
    const inFeet = inside(buffered(point(1000000, 200000), 1000, longIsland), longIsland);
    expect(inFeet(1000000, 203280)).toBe(true);
    expect(inFeet(1000000, 203282)).toBe(false);
  });

  it("finds features across the antimeridian from a buffer that reaches past it", () => {
    const wgs84 = sr(4326);
    const contains = inside(buffered(point(179.995, 0), 1000, wgs84), wgs84);
    // 0.008° of longitude at the equator is 890 m.
    expect(contains(-179.997, 0)).toBe(true);
    expect(contains(eastOf(179.995, 0, 1001) - 360, 0)).toBe(false);
    expect(contains(179.99, 0)).toBe(true);
    expect(contains(0, 0)).toBe(false);
  });

  it("buffers an envelope across the antimeridian as one box", () => {
    const wgs84 = sr(4326);
    const across: Geometry = {
      type: "esriGeometryEnvelope",
      hasZ: false,
      hasM: false,
      xmin: 179,
      ymin: -1,
      xmax: -179,
      ymax: 1,
    };
    const contains = inside(buffered(across, 1000, wgs84), wgs84);
    expect(contains(179.5, 0)).toBe(true);
    expect(contains(-179.5, 0)).toBe(true);
    expect(contains(eastOf(-179, 0, 999), 0)).toBe(true);
    expect(contains(eastOf(-179, 0, 1001), 0)).toBe(false);
    expect(contains(eastOf(179, 0, -999), 0)).toBe(true);
    expect(contains(eastOf(179, 0, -1001), 0)).toBe(false);
    expect(contains(0, 0)).toBe(false);
  });

  it("covers every longitude near a pole that the buffer reaches", () => {
    const wgs84 = sr(4326);
    // 89.995° N is about 560 m from the pole.
    const contains = inside(buffered(point(0, 89.995), 1000, wgs84), wgs84);
    expect(contains(120, 89.999)).toBe(true);
    expect(contains(-170, 89.998)).toBe(true);
    expect(contains(0, 89.98)).toBe(false);
  });

  it("leaves the geometry as it is for a distance of 0", () => {
    const geometry = point(1, 2);
    expect(bufferQueryGeometry(geometry, 0, sr(4326))).toEqual({ ok: true, value: geometry });
  });
});
