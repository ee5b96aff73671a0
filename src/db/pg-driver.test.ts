import { describe, expect, it } from "vitest";
import { inline } from "./pg-driver.js";

describe("inline (values written into joined statements)", () => {
  it("writes strings, numbers, booleans and nulls as quoted literals outside quotes", () => {
    expect(
      inline(`select "a$1" from t where x = $1 and y = $2 and z = $3 and w = $4`, ["it's", 5, true, null]),
    ).toBe(`select "a$1" from t where x =  'it''s'  and y =  '5'  and z =  'true'  and w =  NULL `);
    expect(inline("select $1", ["back\\slash"])).toBe(`select   E'back\\\\slash' `);
  });

  it("refuses what it cannot write safely, so the statement goes on its own", () => {
    expect(inline("select $1", [Buffer.from("x")])).toBeUndefined();
    expect(inline("select $1", [new Date()])).toBeUndefined();
    expect(inline("select $1", ["nul\0"])).toBeUndefined();
    expect(inline("select $1", [Number.NaN])).toBeUndefined();
    expect(inline("select $$ $1 $$", ["x"])).toBeUndefined();
    expect(inline("select E'\\' $1'", ["x"])).toBeUndefined();
    expect(inline("select 1 -- $1", ["x"])).toBeUndefined();
    expect(inline("select $2", ["x"])).toBeUndefined();
  });
});
