import { describe, expect, it } from "vitest";
import type { ItemRow } from "./item.repository.js";
import { itemResource, itemResourceJson } from "./item.service.js";

const ROW: ItemRow = {
  id: "0123456789abcdef0123456789abcdef",
  owner_id: "u1",
  owner: "owner",
  owner_key: "owner",
  folder_id: null,
  title: "Title",
  title_key: "title",
  type: "Web Map",
  type_key: "web map",
  type_keywords: "[]",
  description: "",
  snippet: "",
  tags: "[]",
  url: null,
  properties: null,
  access: "private",
  protected: 0,
  size: 0,
  thumbnail: null,
  created: 1,
  modified: 2,
  extent_xmin: null,
  extent_ymin: null,
  extent_xmax: null,
  extent_ymax: null,
  categories: "[]",
};

describe("itemResourceJson", () => {
  it.each<[string, Partial<ItemRow>, string[]]>([
    ["a bare item", {}, []],
    [
      "awkward text everywhere",
      {
        owner: 'o"w\\n',
        folder_id: "f\u2028",
        title: "t\u0001😀",
        description: '<p>"d"</p>\n',
        snippet: "\ud83d",
        tags: JSON.stringify(['"', "\\", "ünï", "😀", "\t", ""]),
        type_keywords: JSON.stringify(["a,b", "\u007f"]),
        categories: JSON.stringify(["/Categories/É"]),
        url: 'https://example.com/a?b="c"',
        thumbnail: "thumbnail/t.png",
        properties: JSON.stringify({ b: 1, 2: [null, "x"], a: { "1": true } }),
        protected: 1,
        size: 12345,
        access: "shared",
      },
      ["g1", 'g"2'],
    ],
    ["an extent", { extent_xmin: -0.5, extent_ymin: 60, extent_xmax: 6.25, extent_ymax: 61 }, []],
    ["lists stored in another form", { tags: '[ "a", "\\u0041\\/" ]', categories: '["\\ud83d\\ude00"]' }, []],
    ["properties stored as null", { properties: "null" }, []],
  ])("writes JSON.stringify(itemResource(...)) for %s", (_name, changes, groups) => {
    const row = { ...ROW, ...changes };
    expect(itemResourceJson(row, groups, "org1")).toBe(JSON.stringify(itemResource(row, groups, "org1")));
  });
});
