import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engine, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Statistics of a hosted feature layer: `outStatistics` with percentiles, `groupByFieldsForStatistics`
 * and `havingClause`, through the REST API. Every expected answer is worked out by hand from the
 * eight sales below (the working is in the comments), the same on both engines.
 */

type User = { username: string; password: string; token: string };

const DAY = 86_400_000;
const JAN_2020 = Date.UTC(2020, 0, 1);

/** [region, units, price, name]; object ids 1..8 in this order, at (id, id), sold on 2020-01-<id>. */
const SALES: [string, number | null, number | null, string | null][] = [
  ["A", 1, 0.5, "kiwi"],
  ["A", 3, 2.5, "apple"],
  ["A", 2, 1.5, "Äpfel"],
  ["A", 4, null, "pear"],
  ["B", 10, 4.0, "plum"],
  ["B", 20, 8.0, "fig"],
  ["C", 5, 3.0, "date"],
  ["D", null, 2.0, null],
];

describe("hosted feature layers: statistics, percentiles and havingClause", () => {
  let portal: TestPortal;
  let owner: User;
  let layer: string;
  let itemId: string;

  const query = (params: Record<string, unknown>) =>
    portal.get(`${layer}/query`, { where: "1=1", ...params }, owner.token);
  const stats = (entries: Record<string, unknown>[]) => JSON.stringify(entries);
  const rows = (answer: { features?: { attributes: Record<string, unknown> }[] }) => {
    if (!answer.features) throw new Error(JSON.stringify(answer));
    return answer.features.map((f) => f.attributes);
  };
  const COUNT_UNITS = { statisticType: "count", onStatisticField: "units", outStatisticFieldName: "n" };
  const SUM_UNITS = { statisticType: "sum", onStatisticField: "units", outStatisticFieldName: "total" };

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("st_owner", "org_publisher");
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: { name: "Sales", capabilities: "Query" },
        outputType: "featureService",
      },
      owner.token,
    );
    expect(created.success).toBe(true);
    itemId = created.itemId;
    const added = await portal.post(
      `${server}/admin/services/Sales/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            {
              name: "Sales",
              geometryType: "esriGeometryPoint",
              spatialReference: { wkid: 4326 },
              fields: [
                { name: "region", type: "esriFieldTypeString", length: 10 },
                { name: "units", type: "esriFieldTypeInteger" },
                { name: "price", type: "esriFieldTypeDouble" },
                { name: "name", type: "esriFieldTypeString", length: 20 },
                { name: "sold", type: "esriFieldTypeDate" },
              ],
            },
          ],
        },
      },
      owner.token,
    );
    expect(added, JSON.stringify(added)).toMatchObject({ success: true });
    layer = `${server}/services/Sales/FeatureServer/0`;
    const edits = await portal.post(
      `${layer}/addFeatures`,
      {
        features: SALES.map(([region, units, price, name], i) => ({
          attributes: { region, units, price, name, sold: JAN_2020 + i * DAY },
          geometry: { x: i + 1, y: i + 1 },
        })),
      },
      owner.token,
    );
    expect(edits.addResults.map((r: { objectId: number }) => r.objectId)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("says in the layer resource that it takes havingClause and percentiles", async () => {
    const resource = await portal.get(layer, {}, owner.token);
    expect(resource.advancedQueryCapabilities).toMatchObject({
      supportsStatistics: true,
      supportsHavingClause: true,
      supportsPercentileStatistics: true,
    });
  });

  it("orders text by code point and nulls first ascending, last descending, alike on both engines", async () => {
    const ids = async (params: Record<string, unknown>) =>
      rows(await query({ outFields: "OBJECTID", returnGeometry: false, ...params })).map((a) => a.OBJECTID);
    // Names by code point: null, apple (2), date (7), fig (6), kiwi (1), pear (4), plum (5), Äpfel
    // (3): U+00C4 comes after every ASCII letter.
    expect(await ids({ orderByFields: "name ASC" })).toEqual([8, 2, 7, 6, 1, 4, 5, 3]);
    expect(await ids({ orderByFields: "name DESC" })).toEqual([3, 5, 4, 1, 6, 7, 2, 8]);
    // Units: null (8), 1 (1), 2 (3), 3 (2), 4 (4), 5 (7), 10 (5), 20 (6); paged, so in SQL; the
    // sixth to eighth of them descending are 3 (2), 1 (1) and null (8).
    expect(await ids({ orderByFields: "units", resultOffset: 0, resultRecordCount: 3 })).toEqual([8, 1, 3]);
    expect(await ids({ orderByFields: "units DESC", resultOffset: 5, resultRecordCount: 3 })).toEqual([
      3, 1, 8,
    ]);
    const distinct = await query({
      outFields: "name",
      returnDistinctValues: true,
      returnGeometry: false,
      orderByFields: "name",
    });
    expect(rows(distinct).map((a) => a.name)).toEqual([
      null,
      "apple",
      "date",
      "fig",
      "kiwi",
      "pear",
      "plum",
      "Äpfel",
    ]);
    // Statistics groups in the same order: price null (4) first.
    const grouped = await query({
      groupByFieldsForStatistics: "price",
      orderByFields: "price DESC",
      outStatistics: stats([COUNT_UNITS]),
    });
    expect(rows(grouped).map((a) => a.price)).toEqual([8, 4, 3, 2.5, 2, 1.5, 0.5, null]);
  });

  it("answers every statistic per group, text minimum and maximum by code point", async () => {
    const answer = await query({
      groupByFieldsForStatistics: "region",
      outStatistics: stats([
        COUNT_UNITS,
        SUM_UNITS,
        { statisticType: "avg", onStatisticField: "units", outStatisticFieldName: "mean" },
        { statisticType: "var", onStatisticField: "units", outStatisticFieldName: "v" },
        { statisticType: "stddev", onStatisticField: "units", outStatisticFieldName: "sd" },
        { statisticType: "min", onStatisticField: "name", outStatisticFieldName: "first" },
        { statisticType: "max", onStatisticField: "name", outStatisticFieldName: "last" },
      ]),
    });
    // A: 1, 3, 2, 4: sum 10, mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5 over 3.
    // B: 10, 20: mean 15, squared deviations 25 + 25 = 50 over 1. C: one value, no variance.
    // Names by code point: "apple" < "kiwi" < "pear" < "Äpfel" (U+00C4).
    expect(rows(answer)).toEqual([
      {
        region: "A",
        n: 4,
        total: 10,
        mean: 2.5,
        v: 5 / 3,
        sd: Math.sqrt(5 / 3),
        first: "apple",
        last: "Äpfel",
      },
      { region: "B", n: 2, total: 30, mean: 15, v: 50, sd: Math.sqrt(50), first: "fig", last: "plum" },
      { region: "C", n: 1, total: 5, mean: 5, v: null, sd: null, first: "date", last: "date" },
      { region: "D", n: 0, total: null, mean: null, v: null, sd: null, first: null, last: null },
    ]);
  });

  it("answers continuous and discrete percentiles in either order, per group and over everything", async () => {
    const percentile = (
      type: string,
      field: string,
      value: number,
      orderBy: string | undefined,
      out: string,
    ) => ({
      statisticType: type,
      onStatisticField: field,
      outStatisticFieldName: out,
      statisticParameters: orderBy === undefined ? { value } : { value, orderBy },
    });
    const grouped = await query({
      groupByFieldsForStatistics: "region",
      outStatistics: stats([
        percentile("percentile_cont", "units", 0.5, undefined, "median"),
        percentile("percentile_cont", "units", 0.75, "ASC", "q3"),
        percentile("percentile_cont", "units", 0.25, "desc", "q1_desc"),
        percentile("percentile_disc", "units", 0.5, "asc", "disc"),
        percentile("percentile_disc", "units", 0.5, "DESC", "disc_desc"),
        percentile("percentile_disc", "units", 0, "ASC", "disc0"),
        percentile("PERCENTILE_DISC", "units", 1, "ASC", "disc1"),
        percentile("percentile_cont", "price", 0.25, "ASC", "price_q1"),
        percentile("percentile_disc", "sold", 0.5, "ASC", "sold_mid"),
        COUNT_UNITS,
      ]),
    });
    // A, ordered 1 2 3 4 (n 4): continuous at p·(n-1): 0.5 -> 1.5 -> 2 + 0.5·(3-2) = 2.5;
    // 0.75 -> 2.25 -> 3 + 0.25·1 = 3.25; descending 4 3 2 1 at 0.25 -> 0.75 -> 4 + 0.75·(3-4) = 3.25.
    // Discrete, the value at max(1, ceil(p·n)): 0.5 -> 2nd: 2 (descending: 3); 0 -> 1st: 1; 1 -> 4th: 4.
    // Prices of A without the NULL: 0.5 1.5 2.5, at 0.25 -> 0.5 -> 0.5 + 0.5·1 = 1.
    // Sold on days 1..4 of A: the 2nd, 2020-01-02.
    // B, 10 20: 0.5 -> 15; 0.75 -> 17.5; descending 20 10 at 0.25 -> 20 - 2.5 = 17.5; discrete 0.5 -> 1st.
    // C has one value; D has no units, so no percentile of them.
    expect(rows(grouped)).toEqual([
      {
        region: "A",
        median: 2.5,
        q3: 3.25,
        q1_desc: 3.25,
        disc: 2,
        disc_desc: 3,
        disc0: 1,
        disc1: 4,
        price_q1: 1,
        sold_mid: JAN_2020 + DAY,
        n: 4,
      },
      {
        region: "B",
        median: 15,
        q3: 17.5,
        q1_desc: 17.5,
        disc: 10,
        disc_desc: 20,
        disc0: 10,
        disc1: 20,
        price_q1: 5,
        sold_mid: JAN_2020 + 4 * DAY,
        n: 2,
      },
      {
        region: "C",
        median: 5,
        q3: 5,
        q1_desc: 5,
        disc: 5,
        disc_desc: 5,
        disc0: 5,
        disc1: 5,
        price_q1: 3,
        sold_mid: JAN_2020 + 6 * DAY,
        n: 1,
      },
      {
        region: "D",
        median: null,
        q3: null,
        q1_desc: null,
        disc: null,
        disc_desc: null,
        disc0: null,
        disc1: null,
        price_q1: 2,
        sold_mid: JAN_2020 + 7 * DAY,
        n: 0,
      },
    ]);
    expect(grouped.fields).toEqual([
      { name: "region", type: "esriFieldTypeString", alias: "region" },
      { name: "median", type: "esriFieldTypeDouble", alias: "median" },
      { name: "q3", type: "esriFieldTypeDouble", alias: "q3" },
      { name: "q1_desc", type: "esriFieldTypeDouble", alias: "q1_desc" },
      { name: "disc", type: "esriFieldTypeInteger", alias: "disc" },
      { name: "disc_desc", type: "esriFieldTypeInteger", alias: "disc_desc" },
      { name: "disc0", type: "esriFieldTypeInteger", alias: "disc0" },
      { name: "disc1", type: "esriFieldTypeInteger", alias: "disc1" },
      { name: "price_q1", type: "esriFieldTypeDouble", alias: "price_q1" },
      { name: "sold_mid", type: "esriFieldTypeDate", alias: "sold_mid" },
      { name: "n", type: "esriFieldTypeInteger", alias: "n" },
    ]);

    // Everything: 1 2 3 4 5 10 20 (n 7). Continuous 0.5 -> 3 -> 4; 0.75 -> 4.5 -> 5 + 0.5·5 = 7.5.
    // Discrete 0.9 -> ceil(6.3) = 7th: 20; descending 20 10 5 4 3 2 1: 7th: 1. Alone, without
    // other statistics, they still answer the one row of the whole selection.
    const whole = await query({
      outStatistics: stats([
        percentile("percentile_cont", "units", 0.5, "ASC", "median"),
        percentile("percentile_cont", "units", 0.75, "ASC", "q3"),
        percentile("percentile_disc", "units", 0.9, "ASC", "p90"),
        percentile("percentile_disc", "units", 0.9, "DESC", "p90_desc"),
      ]),
    });
    expect(rows(whole)).toEqual([{ median: 4, q3: 7.5, p90: 20, p90_desc: 1 }]);

    // With a where (its parameters come before the percentile's) and an exact spatial relation
    // (a polygon: its matches go in as object ids): units under 10 within x, y <= 4.5 are 1 3 2 4.
    const filtered = await query({
      where: "units < 10",
      geometry: JSON.stringify({
        rings: [
          [
            [0, 0],
            [0, 4.5],
            [4.5, 4.5],
            [4.5, 0],
            [0, 0],
          ],
        ],
        spatialReference: { wkid: 4326 },
      }),
      geometryType: "esriGeometryPolygon",
      outStatistics: stats([
        percentile("percentile_cont", "units", 0.75, "ASC", "q3"),
        percentile("percentile_disc", "units", 0.5, "DESC", "mid"),
      ]),
    });
    expect(rows(filtered)).toEqual([{ q3: 3.25, mid: 3 }]);

    // Nothing selected: one row of NULLs, as SQL's aggregates answer an empty selection.
    const none = await query({
      where: "units > 100",
      outStatistics: stats([percentile("percentile_cont", "units", 0.5, "ASC", "median"), COUNT_UNITS]),
    });
    expect(rows(none)).toEqual([{ median: null, n: 0 }]);
  });

  it("answers percentiles as SQL defines them, and on PostgreSQL as its own functions do", async () => {
    // SQL's definitions, over the values ordered as asked (NULLs left out): continuous, row
    // 1 + p·(n-1) interpolated between its floor and ceiling; discrete, the first value whose
    // cumulative share p·n reaches p.
    const prices = (region: string, order: "ASC" | "DESC") =>
      SALES.filter(([r, , price]) => r === region && price !== null)
        .map(([, , price]) => price as number)
        .sort((a, b) => (order === "ASC" ? a - b : b - a));
    const continuous = (values: number[], p: number) => {
      const row = p * (values.length - 1);
      const [lo, hi] = [values[Math.floor(row)] as number, values[Math.ceil(row)] as number];
      return lo + (row - Math.floor(row)) * (hi - lo);
    };
    const discrete = (values: number[], p: number) => values.find((_, i) => (i + 1) / values.length >= p);
    const db = portal.portico.services.db.kysely;
    const table = sql.table(`fl_${itemId}_0`);
    for (const p of [0, 0.1, 0.25, 1 / 3, 0.5, 0.9, 0.99, 1]) {
      for (const order of ["ASC", "DESC"] as const) {
        const answer = rows(
          await query({
            groupByFieldsForStatistics: "region",
            outStatistics: stats(
              (["percentile_cont", "percentile_disc"] as const).map((type) => ({
                statisticType: type,
                onStatisticField: "price",
                outStatisticFieldName: type === "percentile_cont" ? "c" : "d",
                statisticParameters: { value: p, orderBy: order },
              })),
            ),
          }),
        );
        expect(answer.map((r) => r.region)).toEqual(["A", "B", "C", "D"]);
        for (const r of answer) {
          const values = prices(r.region as string, order);
          expect(r.c as number, `${r.region} ${p} ${order}`).toBeCloseTo(continuous(values, p), 12);
          expect(r.d, `${r.region} ${p} ${order}`).toBe(discrete(values, p));
        }
        if (engine === "postgres") {
          const direction = sql.raw(order);
          const native = await sql<{ region: string; c: number | null; d: number | null }>`
            SELECT f_region AS region,
              percentile_cont(${p}::float8) WITHIN GROUP (ORDER BY f_price ${direction}) AS c,
              percentile_disc(${p}::float8) WITHIN GROUP (ORDER BY f_price ${direction}) AS d
            FROM ${table} GROUP BY f_region ORDER BY f_region`.execute(db);
          // To the last bit: SQLite, which has no such functions, answers these same numbers.
          expect(answer, `${p} ${order}`).toEqual(native.rows);
        }
      }
    }
  });

  it("keeps the groups that meet the havingClause, on aggregates it need not answer", async () => {
    const grouped = (
      havingClause: string,
      outStatistics: Record<string, unknown>[] = [SUM_UNITS],
      extra = {},
    ) =>
      query({
        groupByFieldsForStatistics: "region",
        outStatistics: stats(outStatistics),
        havingClause,
        ...extra,
      });
    const regions = async (havingClause: string) => rows(await grouped(havingClause)).map((r) => r.region);

    // Counts A 4, B 2, C 1, D 1; sums of units A 10, B 30, C 5, D NULL.
    expect(rows(await grouped("COUNT(*) > 1"))).toEqual([
      { region: "A", total: 10 },
      { region: "B", total: 30 },
    ]);
    expect(await regions("COUNT(objectid) >= 2")).toEqual(["A", "B"]);
    // D's sum is NULL: the comparison is unknown, and the group goes.
    expect(await regions("SUM(units) >= 5")).toEqual(["A", "B", "C"]);
    expect(await regions("sum(units) > 1000")).toEqual([]);
    expect(await regions("SUM(units) BETWEEN 5 AND 10")).toEqual(["A", "C"]);
    expect(await regions("SUM(units) NOT BETWEEN 5 AND 10")).toEqual(["B"]);
    expect(await regions("SUM(units) IS NULL")).toEqual(["D"]);
    // Standard deviations: A sqrt(5/3) (1.29), B sqrt(50) (7.07); variances 5/3 and 50.
    expect(await regions("STDDEV(units) > 5")).toEqual(["B"]);
    expect(await regions("VAR(units) = 50 OR VAR(units) < 2")).toEqual(["A", "B"]);
    // Mean prices: A (0.5 + 2.5 + 1.5) / 3 = 1.5, B 6, C 3, D 2; the first names: apple, fig, date, NULL.
    expect(await regions("AVG(price) < 3 AND MIN(name) >= 'a'")).toEqual(["A"]);
    expect(await regions("AVG(price) < 3 OR MIN(name) = 'fig'")).toEqual(["A", "B", "D"]);
    expect(await regions("NOT (AVG(price) < 3)")).toEqual(["B", "C"]);
    expect(await regions("MAX(name) = 'Äpfel'")).toEqual(["A"]);
    // Group-by fields, with IN and arithmetic.
    expect(await regions("region <> 'A' AND COUNT(units) >= 1")).toEqual(["B", "C"]);
    expect(await regions("Region IN ('A', 'C', 'X') OR MAX(units) - MIN(units) = 10")).toEqual([
      "A",
      "B",
      "C",
    ]);
    expect(await regions("region NOT IN ('A', 'B')")).toEqual(["C", "D"]);
    // Integer division truncates (A: 10 / 4 = 2), a double does not; by zero it is NULL (only D's
    // count of units is 0): D alone has 1 / (1 - 0) = 1, the others divide by zero.
    expect(await regions("SUM(units) / COUNT(units) = 2")).toEqual(["A"]);
    expect(await regions("SUM(units) * 1.0 / COUNT(units) = 2.5")).toEqual(["A"]);
    expect(await regions("COUNT(*) / (COUNT(*) - COUNT(units)) = 1")).toEqual(["D"]);
    expect(await regions("-MIN(units) < -4")).toEqual(["B", "C"]);
    // Dates: the last sale of A is 2020-01-04, of B the 6th, of C the 7th, of D the 8th.
    expect(await regions("MAX(sold) < DATE '2020-01-06'")).toEqual(["A"]);
    expect(
      await regions("MAX(sold) >= TIMESTAMP '2020-01-07 00:00:00' AND MAX(sold) < CURRENT_DATE"),
    ).toEqual(["C", "D"]);

    // With a where: units under 4 leave A's 1 3 2 alone.
    expect(rows(await grouped("COUNT(*) >= 2", [SUM_UNITS], { where: "units < 4" }))).toEqual([
      { region: "A", total: 6 },
    ]);
    // Ordered as asked, and the statistics answered are only those of outStatistics.
    const ordered = await grouped("COUNT(*) >= 1 AND MAX(price) > 2", [COUNT_UNITS], {
      orderByFields: "region DESC",
    });
    expect(rows(ordered)).toEqual([
      { region: "C", n: 1 },
      { region: "B", n: 2 },
      { region: "A", n: 4 },
    ]);
    expect(ordered.fields.map((f: { name: string }) => f.name)).toEqual(["region", "n"]);
    // Percentiles and a having together.
    const both = await grouped("COUNT(units) > 1", [
      {
        statisticType: "percentile_cont",
        onStatisticField: "units",
        outStatisticFieldName: "median",
        statisticParameters: { value: 0.5 },
      },
    ]);
    expect(rows(both)).toEqual([
      { region: "A", median: 2.5 },
      { region: "B", median: 15 },
    ]);

    // Without groups, the whole selection is the one group: 8 sales, 45 units.
    expect(rows(await query({ outStatistics: stats([SUM_UNITS]), havingClause: "COUNT(*) = 8" }))).toEqual([
      { total: 45 },
    ]);
    expect(rows(await query({ outStatistics: stats([SUM_UNITS]), havingClause: "COUNT(*) > 100" }))).toEqual(
      [],
    );
  });

  it("refuses bad havingClauses and percentile parameters, naming the parameter", async () => {
    const grouped = (havingClause: string) =>
      query({ groupByFieldsForStatistics: "region", outStatistics: stats([SUM_UNITS]), havingClause });
    const refused = async (answer: Promise<any>, parameter: string, ...words: string[]) => {
      const a = await answer;
      expect(Object.keys(a), JSON.stringify(a)).toEqual(["error"]);
      expect(a.error.code).toBe(400);
      const text = JSON.stringify(a.error);
      for (const word of [parameter, ...words]) expect(text, text).toContain(word);
    };
    await refused(query({ havingClause: "COUNT(*) > 1" }), "havingClause", "outStatistics");
    await refused(grouped("SUM(nope) > 1"), "havingClause", "nope");
    await refused(grouped("MEDIAN(units) > 1"), "havingClause", "MEDIAN");
    await refused(grouped("pg_sleep(1) IS NULL"), "havingClause", "pg_sleep");
    await refused(grouped("units > 1"), "havingClause", "groupByFieldsForStatistics", "units");
    await refused(grouped("SUM(name) > 1"), "havingClause", "SUM", "name");
    await refused(grouped("COUNT(*) > 'many'"), "havingClause", "compare");
    await refused(grouped("COUNT(*)"), "havingClause", "condition");
    await refused(grouped("region LIKE 'A%'"), "havingClause", "LIKE", "where");
    await refused(grouped("UPPER(region) = 'A'"), "havingClause", "UPPER");
    await refused(grouped("SUM(units + 1) > 1"), "havingClause");
    await refused(grouped("COUNT(*) >"), "havingClause", "end of havingClause");
    // Aggregates belong in havingClause only.
    await refused(
      query({ where: "COUNT(*) > 1", outStatistics: stats([SUM_UNITS]) }),
      "where",
      "havingClause",
    );

    const percentile = (entry: Record<string, unknown>) =>
      query({
        outStatistics: stats([
          {
            statisticType: "percentile_cont",
            onStatisticField: "units",
            outStatisticFieldName: "p",
            ...entry,
          },
        ]),
      });
    await refused(percentile({}), "outStatistics", "statisticParameters");
    await refused(percentile({ statisticParameters: { value: 1.5 } }), "outStatistics", "value");
    await refused(percentile({ statisticParameters: { value: -0.1 } }), "outStatistics", "value");
    await refused(percentile({ statisticParameters: { value: "0.5" } }), "outStatistics", "value");
    await refused(
      percentile({ statisticParameters: { value: 0.5, orderBy: "UP" } }),
      "outStatistics",
      "orderBy",
    );
    await refused(
      percentile({ onStatisticField: "name", statisticParameters: { value: 0.5 } }),
      "outStatistics",
      "numeric",
    );
    await refused(
      percentile({ statisticType: "percentile", statisticParameters: { value: 0.5 } }),
      "outStatistics",
      "percentile_cont",
    );
  });

  it("never runs SQL written in a havingClause or where: an error envelope or an answer, nothing changed", async () => {
    const db = portal.portico.services.db.kysely;
    const itemCount = async () =>
      Number((await sql<{ n: number }>`SELECT count(*) AS n FROM items`.execute(db)).rows[0]?.n);
    const items = await itemCount();
    const attempts = [
      "COUNT(*) > 1; DROP TABLE items",
      "COUNT(*) > 1) OR (1=1",
      "COUNT(*) > 1 -- ",
      "COUNT(*) > 1 /* */",
      "COUNT(*) > (SELECT count(*) FROM items)",
      "SUM(units) > 0 UNION SELECT password FROM users",
      'COUNT("units"" FROM items; --") > 0',
      "COUNT(*) > 1 || 'x'",
    ];
    for (const havingClause of attempts) {
      const answer = await query({
        groupByFieldsForStatistics: "region",
        outStatistics: stats([SUM_UNITS]),
        havingClause,
      });
      expect(Object.keys(answer), havingClause).toEqual(["error"]);
      expect(answer.error.code, havingClause).toBe(400);
      expect(JSON.stringify(answer.error), havingClause).toContain("havingClause");
    }
    for (const where of ["1=1; DELETE FROM items", "region = 'A' OR 1=1 --", "1=1) OR (SELECT 1"]) {
      const answer = await query({ where, outStatistics: stats([SUM_UNITS]), havingClause: "COUNT(*) > 0" });
      expect(Object.keys(answer), where).toEqual(["error"]);
      expect(JSON.stringify(answer.error), where).toContain("where");
    }
    // SQL inside a string is only a string: no region is called that.
    const quoted = await query({
      groupByFieldsForStatistics: "region",
      outStatistics: stats([SUM_UNITS]),
      havingClause: "region = 'A''; DELETE FROM items; --' OR MIN(name) = ''') OR 1=1 --'",
    });
    expect(rows(quoted)).toEqual([]);
    expect(await itemCount()).toBe(items);
    expect(await query({ returnCountOnly: true })).toEqual({ count: 8 });
  });
});
