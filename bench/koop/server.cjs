/**
 * The Koop baseline of the bench's features case: Koop (`@koopjs/koop-core`, which serves
 * `@koopjs/featureserver` through its default GeoServices output) with the smallest provider there
 * is: the same points as the portico layer, as one GeoJSON FeatureCollection held in memory and
 * handed to Koop on every request, which filters, pages and encodes it. It runs as its own
 * process, like portico. Settings come from the environment: BENCH_PORT, and BENCH_POINTS_FILE
 * holding the points as a JSON array of [OBJECTID, name, pop, value, date, x, y].
 *
 * CommonJS and outside portico's package on purpose: Koop is installed only for the bench, into
 * bench/koop/node_modules (see bench/README.md).
 */
"use strict";

const fs = require("node:fs");
const Koop = require("@koopjs/koop-core");

const port = Number(process.env.BENCH_PORT);
const pointsFile = process.env.BENCH_POINTS_FILE;
if (!Number.isInteger(port) || port <= 0 || !pointsFile) {
  process.stderr.write("koop server: set BENCH_PORT and BENCH_POINTS_FILE\n");
  process.exit(2);
}

const rows = JSON.parse(fs.readFileSync(pointsFile, "utf8"));
const collection = {
  type: "FeatureCollection",
  // The same schema as the portico layer, so that Koop answers the same fields and object ids
  // rather than guessing types from the first feature and hashing ids.
  metadata: {
    name: "points",
    idField: "OBJECTID",
    geometryType: "Point",
    maxRecordCount: 2000,
    fields: [
      { name: "OBJECTID", type: "Integer" },
      { name: "name", type: "String" },
      { name: "pop", type: "Integer" },
      { name: "value", type: "Double" },
      { name: "date", type: "Date" },
    ],
  },
  features: rows.map(([objectId, name, pop, value, date, x, y]) => ({
    type: "Feature",
    properties: { OBJECTID: objectId, name, pop, value, date },
    geometry: { type: "Point", coordinates: [x, y] },
  })),
};

class Model {
  async getData() {
    return collection;
  }
}

const koop = new Koop({ logLevel: "error" });
koop.register({ type: "provider", name: "bench", version: "1.0.0", Model });
const server = koop.server.listen(port, "127.0.0.1");
process.on("SIGTERM", () => server.close(() => process.exit(0)));
