import { p } from "./params.js";

/** `start` (1-based) and `num` (at most 100), the paging parameters of every ArcGIS listing. */
export const pagingParams = {
  start: p.integer({ min: 1 }),
  num: p.integer({ min: 1, max: 100 }),
};

export interface Page {
  start: number;
  num: number;
}

/** The page asked for, with the ArcGIS defaults (start 1, 10 per page). */
export function pageOf(params: { start?: number | undefined; num?: number | undefined }): Page {
  return { start: params.start ?? 1, num: params.num ?? 10 };
}

/** The paging fields of a listing answer; `nextStart` is -1 on the last page. */
export function pageInfo(page: Page, total: number, returned: number) {
  const next = page.start + returned;
  return {
    total,
    start: page.start,
    num: page.num,
    nextStart: returned === 0 || next > total ? -1 : next,
  };
}
