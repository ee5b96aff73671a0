import proj4 from "proj4";
import { describe, expect, it } from "vitest";
import { envelopeParts, type Geometry, parseEsriGeometry } from "./esri-json.js";
import {
  projectGeometry,
  projector,
  type ResolvedReference,
  resolveSpatialReference,
  spatialReferenceOf,
  WEB_MERCATOR_HALF_WORLD,
  wrapRange,
} from "./projection.js";

function sr(reference: Parameters<typeof resolveSpatialReference>[0]): ResolvedReference {
  const result = resolveSpatialReference(reference);
  if (!result.ok) throw new Error(result.error.message);
  return result.value;
}

function geometry(value: unknown): Geometry {
  const result = parseEsriGeometry(value);
  if (!result.ok) throw new Error(result.error.message);
  return result.value;
}

const wgs84 = sr({ wkid: 4326 });
const webMercator = sr({ wkid: 3857 });

/**
 * The length of the WGS 84 meridian arc from the equator to latitude φ, by the series of Helmert
 * (as in Snyder, "Map Projections: A Working Manual", eq. 3-21): an independent check of the
 * northing of a point on a UTM zone's central meridian, which is 0.9996 times this length.
 */
function meridianArc(latitudeDegrees: number): number {
  const a = 6378137;
  const f = 1 / 298.257223563;
  const e2 = f * (2 - f);
  const e4 = e2 * e2;
  const e6 = e4 * e2;
  const phi = (latitudeDegrees * Math.PI) / 180;
  return (
    a *
    ((1 - e2 / 4 - (3 * e4) / 64 - (5 * e6) / 256) * phi -
      ((3 * e2) / 8 + (3 * e4) / 32 + (45 * e6) / 1024) * Math.sin(2 * phi) +
      ((15 * e4) / 256 + (45 * e6) / 1024) * Math.sin(4 * phi) -
      ((35 * e6) / 3072) * Math.sin(6 * phi))
  );
}

describe("resolveSpatialReference", () => {
  it("maps Esri's Web Mercator codes to 3857 and writes them as ArcGIS does", () => {
    for (const wkid of [102100, 102113, 900913, 3857]) {
      const resolved = sr({ wkid });
      expect(resolved.key).toBe("EPSG:3857");
      expect(spatialReferenceOf(resolved)).toEqual({ wkid: 102100, latestWkid: 3857 });
    }
    expect(sr({ wkid: 102100, latestWkid: 3857 }).key).toBe("EPSG:3857");
  });

  it("prefers latestWkid, and knows which references are geographic", () => {
    expect(sr({ wkid: 999999, latestWkid: 4326 }).wkid).toBe(4326);
    expect(wgs84.geographic).toBe(true);
    expect(webMercator.geographic).toBe(false);
    expect(sr({ wkid: 32633 }).geographic).toBe(false);
  });

  it("names an unknown wkid", () => {
    expect(resolveSpatialReference({ wkid: 123456789 })).toEqual({
      ok: false,
      error: {
        code: "unknownSpatialReference",
        message: "wkid 123456789 is not a known EPSG spatial reference.",
      },
    });
  });

  it("refuses a reference that is not horizontal, and one whose datum shift needs a grid file", () => {
    expect(resolveSpatialReference({ wkid: 5703 })).toMatchObject({
      ok: false,
      error: {
        code: "unsupportedSpatialReference",
        message: expect.stringContaining("wkid 5703 (NAVD88 height)"),
      },
    });
    expect(resolveSpatialReference({ wkid: 27700 })).toMatchObject({
      ok: false,
      error: {
        code: "unsupportedSpatialReference",
        message: expect.stringContaining("OSTN15_NTv2_OSGBtoETRS.gsb"),
      },
    });
  });

  it("reports a wkt it cannot read", () => {
    expect(resolveSpatialReference({ wkt: "NOT WKT" })).toMatchObject({
      ok: false,
      error: { code: "unknownSpatialReference" },
    });
  });

  it("gives the wrap of longitude and of Web Mercator, and none for a projected grid", () => {
    expect(wrapRange(wgs84)).toEqual([-180, 180]);
    expect(wrapRange(webMercator)).toEqual([-WEB_MERCATOR_HALF_WORLD, WEB_MERCATOR_HALF_WORLD]);
    expect(wrapRange(sr({ wkid: 2154 }))).toBeUndefined();
  });
});

describe("projector with published coordinates", () => {
  it("projects to Web Mercator: the origin, and the corner of the square world", () => {
    const project = projector(wgs84, webMercator);
    const [originX, originY] = project(0, 0);
    expect(originX).toBeCloseTo(0, 6);
    expect(originY).toBeCloseTo(0, 6);
    const [x, y] = project(180, 85.0511287798);
    expect(x).toBeCloseTo(20037508.34, 2);
    expect(y).toBeCloseTo(20037508.34, 2);
    const [lon, lat] = projector(sr({ wkid: 102100 }), wgs84)(-20037508.34, -20037508.34);
    expect(lon).toBeCloseTo(-180, 7);
    expect(lat).toBeCloseTo(-85.0511287798, 7);
  });

  it("projects to UTM zone 33N: the false easting on the central meridian and the meridian arc", () => {
    const project = projector(wgs84, sr({ wkid: 32633 }));
    expect(project(15, 0)[0]).toBeCloseTo(500000, 6);
    expect(project(15, 0)[1]).toBeCloseTo(0, 6);
    const [easting, northing] = project(15, 52);
    expect(easting).toBeCloseTo(500000, 6);
    expect(Math.abs(northing - 0.9996 * meridianArc(52))).toBeLessThan(0.01);
    // The southern zone adds a false northing of 10,000 km.
    expect(projector(wgs84, sr({ wkid: 32733 }))(15, 0)[1]).toBeCloseTo(10_000_000, 6);
  });

  it("projects to Lambert-93 (EPSG:2154): IGN's origin 3°E 46°30'N is 700000, 6600000", () => {
    const [x, y] = projector(wgs84, sr({ wkid: 2154 }))(3, 46.5);
    expect(x).toBeCloseTo(700000, 3);
    expect(y).toBeCloseTo(6600000, 3);
  });

  it("projects a wkt: the Ordnance Survey's worked example of the National Grid projection", () => {
    // "A guide to coordinate systems in Great Britain", annex C: Caister water tower at
    // 52°39'27.2531"N 1°43'4.5177"E on OSGB36 is E 651409.903, N 313177.270 (the projection
    // alone, on the Airy ellipsoid, without the datum shift that needs the OSTN15 grid).
    const airy = 'SPHEROID["Airy 1830",6377563.396,299.3249646]';
    const geographic = `GEOGCS["OSGB36",DATUM["OSGB_1936",${airy}],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]]`;
    const grid = `PROJCS["British National Grid",${geographic},PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",49],PARAMETER["central_meridian",-2],PARAMETER["scale_factor",0.9996012717],PARAMETER["false_easting",400000],PARAMETER["false_northing",-100000],UNIT["metre",1]]`;
    const lat = 52 + 39 / 60 + 27.2531 / 3600;
    const lon = 1 + 43 / 60 + 4.5177 / 3600;
    expect(sr({ wkt: geographic }).geographic).toBe(true);
    expect(sr({ wkt: grid }).geographic).toBe(false);
    const [e, n] = projector(sr({ wkt: geographic }), sr({ wkt: grid }))(lon, lat);
    expect(e).toBeCloseTo(651409.903, 2);
    expect(n).toBeCloseTo(313177.27, 2);
  });

  it("returns to the start after a round trip through projected references", () => {
    for (const wkid of [3857, 32633, 2154, 3395, 25832]) {
      const target = sr({ wkid });
      const [x, y] = projector(wgs84, target)(10.123456, 48.654321);
      const [lon, lat] = projector(target, wgs84)(x, y);
      expect(lon).toBeCloseTo(10.123456, 8);
      expect(lat).toBeCloseTo(48.654321, 8);
    }
  });
});

describe("projector between WGS 84 and Web Mercator", () => {
  // proj4 itself, from the EPSG definitions the references resolve to: what the shortcut replaces.
  const viaProj4 = proj4(wgs84.definition, webMercator.definition);

  it("gives proj4's coordinates to the bit, both ways, on a grid over the world and past its edges", () => {
    const forward = projector(wgs84, webMercator);
    const inverse = projector(webMercator, wgs84);
    for (let lon = -200; lon <= 200; lon += 7.3) {
      for (let lat = -89.5; lat <= 89.5; lat += 3.1) {
        expect(forward(lon, lat)).toEqual(viaProj4.forward([lon, lat]));
        const x = lon * 111_319.49;
        const y = lat * 250_000;
        expect(inverse(x, y)).toEqual(viaProj4.inverse([x, y]));
      }
    }
    for (const [lon, lat] of [
      [180, 0],
      [-180, 85.0511287798],
      [180.000001, -60],
      [540, 10],
    ] as const) {
      expect(forward(lon, lat)).toEqual(viaProj4.forward([lon, lat]));
    }
  });

  it("refuses the poles and beyond, where proj4 answers no number", () => {
    const forward = projector(wgs84, webMercator);
    for (const [lon, lat] of [
      [0, 90],
      [10, -90],
      [0, 91],
      [0, 89.999999999999],
    ] as const) {
      expect(viaProj4.forward([lon, lat]).every(Number.isFinite)).toBe(false);
      expect(() => forward(lon, lat)).toThrow(/cannot be projected/);
    }
  });
});

describe("projectGeometry", () => {
  it("projects a polygon with a hole ring by ring, keeping Z and M", () => {
    const polygon = geometry({
      hasZ: true,
      hasM: true,
      rings: [
        [
          [0, 0, 5, 1],
          [0, 1, 5, 2],
          [1, 1, 5, 3],
          [1, 0, 5, 4],
          [0, 0, 5, 1],
        ],
        [
          [0.2, 0.2, 6, 5],
          [0.4, 0.2, 6, 6],
          [0.4, 0.4, 6, 7],
          [0.2, 0.2, 6, 5],
        ],
      ],
    });
    const result = projectGeometry(polygon, wgs84, webMercator);
    if (!result.ok || result.value.type !== "esriGeometryPolygon") throw new Error("expected a polygon");
    expect(result.value.spatialReference).toEqual({ wkid: 102100, latestWkid: 3857 });
    expect(result.value.rings).toHaveLength(2);
    expect(result.value.rings[1]).toHaveLength(4);
    const corner = result.value.rings[0]?.[2] ?? [];
    expect(corner[0]).toBeCloseTo(111319.49, 2);
    expect(corner[1]).toBeCloseTo(111325.14, 2);
    expect(corner.slice(2)).toEqual([5, 3]);
  });

  it("projects an envelope as the box of its densified edges", () => {
    // In UTM, a parallel bows towards the pole away from the central meridian: the middle of the
    // southern edge lies south of its corners, so a box of the corners alone would cut it off.
    const utm = sr({ wkid: 32633 });
    const result = projectGeometry(geometry({ xmin: 12, ymin: 40, xmax: 18, ymax: 50 }), wgs84, utm);
    if (!result.ok || result.value.type !== "esriGeometryEnvelope") throw new Error("expected an envelope");
    const middleSouth = projector(wgs84, utm)(15, 40)[1];
    const cornerSouth = projector(wgs84, utm)(12, 40)[1];
    expect(middleSouth).toBeLessThan(cornerSouth - 1000);
    expect(result.value.ymin).toBeCloseTo(middleSouth, 6);
    expect(result.value.ymax).toBeCloseTo(projector(wgs84, utm)(12, 50)[1], 6);
  });

  it("clips a longitude/latitude envelope at the poles, and refuses what Mercator cannot reach", () => {
    const pastThePole = geometry({ xmin: -10, ymin: 80, xmax: 10, ymax: 95 });
    expect(projectGeometry(pastThePole, wgs84, sr({ wkid: 4326 })).ok).toBe(true);
    expect(projectGeometry(pastThePole, wgs84, webMercator)).toMatchObject({
      ok: false,
      error: { code: "outsideProjection" },
    });
    expect(projectGeometry(geometry({ x: 0, y: 90 }), wgs84, webMercator)).toMatchObject({
      ok: false,
      error: {
        code: "outsideProjection",
        message: "(0, 90) cannot be projected from EPSG:4326 to EPSG:3857.",
      },
    });
  });

  it("refuses an envelope across the antimeridian, which projects part by part after envelopeParts", () => {
    const across = geometry({ xmin: 170, ymin: -10, xmax: -170, ymax: 10 });
    expect(projectGeometry(across, wgs84, webMercator)).toMatchObject({
      ok: false,
      error: { code: "invalidValue" },
    });
    const parts = envelopeParts(
      across as { xmin: number; ymin: number; xmax: number; ymax: number },
      wrapRange(wgs84),
    );
    if (!parts.ok) throw new Error(parts.error.message);
    const projected = parts.value.map((part) => projectGeometry(geometry(part), wgs84, webMercator));
    expect(
      projected.map((p) => p.ok && p.value.type === "esriGeometryEnvelope" && [p.value.xmin, p.value.xmax]),
    ).toEqual([
      [expect.closeTo(18924313.43, 2), expect.closeTo(WEB_MERCATOR_HALF_WORLD, 2)],
      [expect.closeTo(-WEB_MERCATOR_HALF_WORLD, 2), expect.closeTo(-18924313.43, 2)],
    ]);
  });
});
