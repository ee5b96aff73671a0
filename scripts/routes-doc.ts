import { writeFileSync } from "node:fs";
import { ROUTE_TABLE_PATH, routeTableMarkdown } from "../src/http/routes/route-table.js";

/**
 * `npm run routes:doc`: writes docs/routes.md from `allRoutes`. npm runs scripts from the
 * repository's root, where the path is relative to; route-table.test.ts fails while the file is
 * not what this writes.
 */
writeFileSync(ROUTE_TABLE_PATH, routeTableMarkdown());
console.log(`wrote ${ROUTE_TABLE_PATH}`);
