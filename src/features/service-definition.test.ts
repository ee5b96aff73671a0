import { describe, expect, it } from "vitest";
import { PorticoError } from "../errors.js";
import { p } from "../validation/params.js";
import { addToDefinition, addToDefinitionSchema, type StoredService } from "./service-definition.js";

const service = (ids: number[]): StoredService => ({
  name: "S",
  definition: {},
  layers: ids.map((id) => ({ id, name: `L${id}` })),
  tables: [],
});

describe("layer and table ids", () => {
  const spec = p.json(addToDefinitionSchema);

  it("refuses an id above 999,999,999, which no layer URL could reach", () => {
    expect(spec.parse('{"layers":[{"name":"a","id":999999999}]}').ok).toBe(true);
    for (const id of ["1000000000", "1e300"]) {
      expect(spec.parse(`{"layers":[{"name":"a","id":${id}}]}`).ok).toBe(false);
    }
  });

  it("assigns ids after the highest, and refuses to assign one beyond the highest allowed", () => {
    expect(addToDefinition(service([0, 7]), { layers: [{ name: "new" }] }).added.layers).toEqual([
      { name: "new", id: 8 },
    ]);
    expect(() => addToDefinition(service([999_999_999]), { layers: [{ name: "new" }] })).toThrow(
      PorticoError,
    );
    // An explicit free id still fits.
    expect(
      addToDefinition(service([999_999_999]), { layers: [{ name: "new", id: 3 }] }).added.layers,
    ).toEqual([{ name: "new", id: 3 }]);
  });
});
