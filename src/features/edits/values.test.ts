import { describe, expect, it } from "vitest";
import { type LayerSchema, layerSchema } from "../layer-schema.js";
import type { LayerDefinition } from "../service-definition.js";
import {
  type Checked,
  type CheckedAdd,
  type CheckedUpdate,
  checkAdd,
  checkUpdate,
  MAX_EDIT_FEATURES,
  parseDeletes,
  parseFeatureList,
} from "./values.js";

const NOW = 1_700_000_000_000;
const ADD = { useGlobalIds: false, now: NOW, editor: "ann" };
const UPDATE = { useGlobalIds: false, allowGeometryUpdates: true, now: NOW, editor: "ann" };
const GENERATED_GUID = /^\{[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}\}$/;

/** One field of every type an attribute can set, a coded and a range domain, editor tracking on. */
const inspections: LayerDefinition = {
  id: 0,
  name: "Inspections",
  geometryType: "esriGeometryPoint",
  spatialReference: { wkid: 4326 },
  objectIdField: "OBJECTID",
  fields: [
    { name: "OBJECTID", type: "esriFieldTypeOID" },
    { name: "GlobalID", type: "esriFieldTypeGlobalID" },
    {
      name: "Status",
      type: "esriFieldTypeSmallInteger",
      nullable: false,
      defaultValue: 1,
      domain: {
        type: "codedValue",
        name: "StatusCodes",
        codedValues: [
          { name: "Open", code: 1 },
          { name: "Closed", code: 2 },
        ],
      },
    },
    { name: "Visits", type: "esriFieldTypeInteger" },
    { name: "Serial", type: "esriFieldTypeBigInteger" },
    { name: "Ratio", type: "esriFieldTypeSingle" },
    {
      name: "Depth",
      type: "esriFieldTypeDouble",
      domain: { type: "range", name: "DepthRange", range: [0, 100] },
    },
    { name: "Label", type: "esriFieldTypeString", length: 5, nullable: false },
    {
      name: "Kind",
      type: "esriFieldTypeString",
      domain: {
        type: "codedValue",
        name: "Kinds",
        codedValues: [
          { name: "Alpha", code: "A" },
          { name: "Beta", code: "B" },
        ],
      },
    },
    { name: "Inspected", type: "esriFieldTypeDate" },
    { name: "Day", type: "esriFieldTypeDateOnly" },
    { name: "StartTime", type: "esriFieldTypeTimeOnly" },
    { name: "Stamp", type: "esriFieldTypeTimestampOffset" },
    { name: "Ref", type: "esriFieldTypeGUID" },
    { name: "Photo", type: "esriFieldTypeBlob" },
    { name: "Notes", type: "esriFieldTypeXML" },
    { name: "Legacy", type: "esriFieldTypeString", editable: false },
  ],
};
const tracking = { editorTrackingInfo: { enableEditorTracking: true } };
const schema: LayerSchema = layerSchema(inspections, "layer", tracking);

/** The columns of an add that gives only Label "abc", as worked out by hand from the definition. */
const minimalColumns = {
  f_globalid: expect.stringMatching(GENERATED_GUID),
  f_status: 1,
  f_visits: null,
  f_serial: null,
  f_ratio: null,
  f_depth: null,
  f_label: "abc",
  f_kind: null,
  f_inspected: null,
  f_day: null,
  f_starttime: null,
  f_stamp: null,
  f_ref: null,
  f_photo: null,
  f_notes: null,
  f_legacy: null,
  f_creationdate: NOW,
  f_creator: "ann",
  f_editdate: NOW,
  f_editor: "ann",
};

function added(result: Checked<CheckedAdd>): CheckedAdd {
  if (!result.ok)
    throw new Error(`expected a valid add, got ${result.error.code}: ${result.error.description}`);
  return result.value;
}

function updated(result: Checked<CheckedUpdate>): CheckedUpdate {
  if (!result.ok)
    throw new Error(`expected a valid update, got ${result.error.code}: ${result.error.description}`);
  return result.value;
}

/** The column an add of Label "abc" plus one attribute gives that attribute's field. */
function addOne(name: string, value: unknown, layer: LayerSchema = schema): Checked<unknown> {
  const result = checkAdd(layer, { attributes: { Label: "abc", [name]: value } }, ADD);
  if (!result.ok) return result;
  return { ok: true, value: result.value.columns[`f_${name.toLowerCase()}`] };
}

const refused = (code: number, description: string) => ({ ok: false, error: { code, description } });
const accepted = (value: unknown) => ({ ok: true, value });

describe("checkAdd", () => {
  it("turns a feature with every field type into column values", () => {
    const result = added(
      checkAdd(
        schema,
        {
          attributes: {
            Status: 2,
            Visits: 12,
            Serial: 10111222333,
            Ratio: 0.5,
            Depth: 12.25,
            Label: "Pipe",
            Kind: "B",
            Inspected: 1227663551096,
            Day: "2023-08-23",
            StartTime: "15:54:36",
            Stamp: "2003-01-25T17:00:00-05:00",
            Ref: "39b856dc-afe4-4c02-b433-a9361acd91cf",
            Photo: "aGVsbG8=",
            Notes: "<a>b</a>",
          },
          geometry: { x: -118.15, y: 33.8, spatialReference: { wkid: 4326 } },
        },
        ADD,
      ),
    );
    expect(result).toEqual({
      columns: {
        ...minimalColumns,
        f_status: 2,
        f_visits: 12,
        f_serial: 10111222333,
        f_ratio: 0.5,
        f_depth: 12.25,
        f_label: "Pipe",
        f_kind: "B",
        f_inspected: 1227663551096,
        f_day: "2023-08-23",
        f_starttime: "15:54:36",
        f_stamp: "2003-01-25T17:00:00-05:00",
        f_ref: "{39B856DC-AFE4-4C02-B433-A9361ACD91CF}",
        f_photo: "aGVsbG8=",
        f_notes: "<a>b</a>",
      },
      geometry: {
        type: "esriGeometryPoint",
        x: -118.15,
        y: 33.8,
        hasZ: false,
        hasM: false,
        spatialReference: { wkid: 4326 },
      },
      globalId: expect.stringMatching(GENERATED_GUID),
    });
    expect(result.globalId).toBe(result.columns.f_globalid);
  });

  it("fills absent fields with their default or null and sets the editor-tracking fields", () => {
    expect(added(checkAdd(schema, { attributes: { Label: "abc" } }, ADD))).toEqual({
      columns: minimalColumns,
      geometry: null,
      globalId: expect.stringMatching(GENERATED_GUID),
    });
  });

  it("records an anonymous edit with null creator and editor", () => {
    const { columns } = added(
      checkAdd(schema, { attributes: { Label: "abc" } }, { useGlobalIds: false, now: NOW }),
    );
    expect([columns.f_creator, columns.f_editor]).toEqual([null, null]);
  });

  it("gives every add a GlobalID of its own", () => {
    const first = added(checkAdd(schema, { attributes: { Label: "a" } }, ADD));
    const second = added(checkAdd(schema, { attributes: { Label: "a" } }, ADD));
    expect(first.globalId).not.toBe(second.globalId);
  });

  it("matches attribute names to fields regardless of case and ignores names that are no field", () => {
    const { columns } = added(
      checkAdd(schema, { attributes: { LABEL: "abc", visits: 3, Shape__Area: 12.5, nonsense: "x" } }, ADD),
    );
    expect(columns).toEqual({ ...minimalColumns, f_visits: 3 });
  });

  it("refuses two spellings of one field", () => {
    expect(checkAdd(schema, { attributes: { Label: "a", label: "b" } }, ADD)).toEqual(
      refused(
        1000,
        "Non-specific edit content error: attributes 'Label' and 'label' both name field Label (names are compared regardless of case).",
      ),
    );
  });

  it("ignores the object id, the GlobalID and the editor-tracking values a feature gives", () => {
    const result = added(
      checkAdd(
        schema,
        {
          attributes: {
            OBJECTID: 99,
            GlobalID: "{74100804-E229-49B8-8CDC-9B5D3EF03EDA}",
            Label: "abc",
            CreationDate: 5,
            Creator: "mallory",
            EditDate: 6,
            Editor: "mallory",
          },
        },
        ADD,
      ),
    );
    expect(result.columns).toEqual(minimalColumns);
    expect(result.columns).not.toHaveProperty("oid");
    expect(result.globalId).not.toBe("{74100804-E229-49B8-8CDC-9B5D3EF03EDA}");
  });

  it("keeps the GlobalID a feature gives with useGlobalIds, in upper case with braces", () => {
    const result = added(
      checkAdd(
        schema,
        { attributes: { Label: "abc", globalid: "74100804-e229-49b8-8cdc-9b5d3ef03eda" } },
        { ...ADD, useGlobalIds: true },
      ),
    );
    expect(result.globalId).toBe("{74100804-E229-49B8-8CDC-9B5D3EF03EDA}");
    expect(result.columns.f_globalid).toBe("{74100804-E229-49B8-8CDC-9B5D3EF03EDA}");
  });

  it("generates a GlobalID with useGlobalIds when the feature gives none", () => {
    const result = added(checkAdd(schema, { attributes: { Label: "abc" } }, { ...ADD, useGlobalIds: true }));
    expect(result.globalId).toMatch(GENERATED_GUID);
  });

  it("refuses an empty or malformed GlobalID with useGlobalIds", () => {
    const withGlobalIds = { ...ADD, useGlobalIds: true };
    expect(checkAdd(schema, { attributes: { Label: "a", GlobalID: "" } }, withGlobalIds)).toEqual(
      refused(1021, "Empty GlobalID. The feature's GlobalID is an empty string."),
    );
    expect(checkAdd(schema, { attributes: { Label: "a", GlobalID: "{1234}" } }, withGlobalIds)).toEqual(
      refused(
        1016,
        'Setting of value for GlobalID failed: "{1234}" is not a GUID ({8-4-4-4-12} hexadecimal digits).',
      ),
    );
  });

  it("checks integers against the range of their type", () => {
    expect(addOne("Status", 2)).toEqual(accepted(2));
    expect(addOne("Visits", 2_147_483_647)).toEqual(accepted(2_147_483_647));
    expect(addOne("Visits", -2_147_483_648)).toEqual(accepted(-2_147_483_648));
    expect(addOne("Visits", 2_147_483_648)).toEqual(
      refused(
        1016,
        "Setting of value for Visits failed: 2147483648 is outside the range of an esriFieldTypeInteger field (-2147483648 to 2147483647).",
      ),
    );
    expect(addOne("Serial", 9_007_199_254_740_991)).toEqual(accepted(9_007_199_254_740_991));
    expect(addOne("Serial", 2 ** 53)).toEqual(
      refused(
        1016,
        "Setting of value for Serial failed: 9007199254740992 is outside the range of an esriFieldTypeBigInteger field (-9007199254740991 to 9007199254740991).",
      ),
    );
    expect(addOne("Visits", 1.5)).toEqual(
      refused(1016, "Setting of value for Visits failed: 1.5 is not an integer."),
    );
    expect(addOne("Visits", "many")).toEqual(
      refused(1016, 'Setting of value for Visits failed: "many" is not a number.'),
    );
  });

  it("checks a SmallInteger against 16 bits", () => {
    const small = layerSchema(
      {
        id: 1,
        name: "Small",
        geometryType: "esriGeometryPoint",
        fields: [{ name: "N", type: "esriFieldTypeSmallInteger" }],
      },
      "layer",
      {},
    );
    expect(addOne("N", -32_768, small)).toEqual(accepted(-32_768));
    expect(addOne("N", 32_767, small)).toEqual(accepted(32_767));
    expect(addOne("N", 32_768, small)).toEqual(
      refused(
        1016,
        "Setting of value for N failed: 32768 is outside the range of an esriFieldTypeSmallInteger field (-32768 to 32767).",
      ),
    );
  });

  it("accepts numbers written as strings and booleans for integers", () => {
    expect(addOne("Visits", "42")).toEqual(accepted(42));
    expect(addOne("Visits", "-7")).toEqual(accepted(-7));
    expect(addOne("Depth", "12.5")).toEqual(accepted(12.5));
    expect(addOne("Visits", true)).toEqual(accepted(1));
    expect(addOne("Visits", false)).toEqual(accepted(0));
    expect(addOne("Visits", "")).toEqual(
      refused(1016, 'Setting of value for Visits failed: "" is not a number.'),
    );
    expect(addOne("Visits", " 42")).toEqual(
      refused(1016, 'Setting of value for Visits failed: " 42" is not a number.'),
    );
    expect(addOne("Depth", true)).toEqual(
      refused(1016, "Setting of value for Depth failed: true is not a finite number."),
    );
  });

  it("checks Single and Double values", () => {
    expect(addOne("Ratio", 3.4e38)).toEqual(accepted(3.4e38));
    expect(addOne("Ratio", 3.5e38)).toEqual(
      refused(
        1016,
        "Setting of value for Ratio failed: 3.5e+38 is beyond the range of an esriFieldTypeSingle field (±3.4028234663852886e+38).",
      ),
    );
    expect(addOne("Ratio", Number.POSITIVE_INFINITY)).toEqual(
      refused(1016, "Setting of value for Ratio failed: Infinity is not a finite number."),
    );
    expect(addOne("Ratio", [1])).toEqual(
      refused(1016, "Setting of value for Ratio failed: [1] is not a finite number."),
    );
  });

  it("checks the length of strings in UTF-16 code units", () => {
    expect(addOne("Label", "abcde")).toEqual(accepted("abcde"));
    expect(addOne("Label", "abcdef")).toEqual(
      refused(
        1016,
        "Setting of value for Label failed: the text is 6 characters long; the field holds at most 5.",
      ),
    );
    // Three emoji: three code points, six UTF-16 code units.
    expect(addOne("Label", "😀😀😀")).toEqual(
      refused(
        1016,
        "Setting of value for Label failed: the text is 6 characters long; the field holds at most 5.",
      ),
    );
    expect(addOne("Label", "😀😀")).toEqual(accepted("😀😀"));
  });

  it("writes a number given for a string field as text", () => {
    expect(addOne("Label", 12345)).toEqual(accepted("12345"));
    expect(addOne("Label", 123456)).toEqual(
      refused(
        1016,
        "Setting of value for Label failed: the text is 6 characters long; the field holds at most 5.",
      ),
    );
    expect(addOne("Label", true)).toEqual(
      refused(1016, "Setting of value for Label failed: true is not a string; the field holds text."),
    );
  });

  it("refuses text that no database stores as given", () => {
    expect(addOne("Label", "a\u0000b")).toEqual(
      refused(
        1016,
        "Setting of value for Label failed: the text contains a NUL character (U+0000), which no field holds.",
      ),
    );
    expect(addOne("Label", "a\uD800b")).toEqual(
      refused(1016, "Setting of value for Label failed: the text contains an unpaired UTF-16 surrogate."),
    );
  });

  it("takes dates as epoch milliseconds", () => {
    expect(addOne("Inspected", 1227663551096)).toEqual(accepted(1227663551096));
    expect(addOne("Inspected", "1227663551096")).toEqual(accepted(1227663551096));
    expect(addOne("Inspected", -86_400_000)).toEqual(accepted(-86_400_000));
    expect(addOne("Inspected", 1227663551096.6)).toEqual(accepted(1227663551097));
    expect(addOne("Inspected", "2008-11-26T01:39:11Z")).toEqual(
      refused(
        1016,
        'Setting of value for Inspected failed: "2008-11-26T01:39:11Z" is not a date: dates are milliseconds since 1970-01-01 UTC, as a number.',
      ),
    );
    expect(addOne("Inspected", 9e15)).toEqual(
      refused(
        1016,
        "Setting of value for Inspected failed: 9000000000000000 is beyond the range of a date (±8640000000000000 ms).",
      ),
    );
  });

  it("takes DateOnly, TimeOnly and TimestampOffset values as ISO text", () => {
    expect(addOne("Day", "2024-02-29")).toEqual(accepted("2024-02-29"));
    expect(addOne("Day", "2023-02-29")).toEqual(
      refused(1016, 'Setting of value for Day failed: "2023-02-29" is not a date as YYYY-MM-DD.'),
    );
    expect(addOne("Day", "2023-8-23")).toEqual(
      refused(1016, 'Setting of value for Day failed: "2023-8-23" is not a date as YYYY-MM-DD.'),
    );
    expect(addOne("Day", 1692748800000)).toEqual(
      refused(1016, "Setting of value for Day failed: 1692748800000 is not a date as YYYY-MM-DD."),
    );
    expect(addOne("StartTime", "23:59:59")).toEqual(accepted("23:59:59"));
    expect(addOne("StartTime", "24:00:00")).toEqual(
      refused(1016, 'Setting of value for StartTime failed: "24:00:00" is not a time of day as HH:MM:SS.'),
    );
    expect(addOne("Stamp", "2003-01-25T17:00:00.125+14:00")).toEqual(
      accepted("2003-01-25T17:00:00.125+14:00"),
    );
    expect(addOne("Stamp", "2003-01-25T17:00:00Z")).toEqual(accepted("2003-01-25T17:00:00+00:00"));
    for (const wrong of ["2003-01-25T17:00:00", "2003-01-25T17:00:00+15:00", "2003-01-25 17:00:00-05:00"]) {
      expect(addOne("Stamp", wrong)).toEqual(
        refused(
          1016,
          `Setting of value for Stamp failed: "${wrong}" is not a timestamp with an offset, as YYYY-MM-DDTHH:MM:SS±HH:MM.`,
        ),
      );
    }
  });

  it("writes GUIDs in upper case with braces", () => {
    expect(addOne("Ref", "{39b856dc-afe4-4c02-b433-a9361acd91cf}")).toEqual(
      accepted("{39B856DC-AFE4-4C02-B433-A9361ACD91CF}"),
    );
    expect(addOne("Ref", "{39b856dc-afe4-4c02-b433-a9361acd91cf")).toEqual(
      refused(
        1016,
        'Setting of value for Ref failed: "{39b856dc-afe4-4c02-b433-a9361acd91cf" is not a GUID ({8-4-4-4-12} hexadecimal digits).',
      ),
    );
  });

  it("takes Blob values as base64 and XML as text", () => {
    expect(addOne("Photo", "aGVsbG8gd29ybGQ=")).toEqual(accepted("aGVsbG8gd29ybGQ="));
    expect(addOne("Photo", "not base64!")).toEqual(
      refused(1016, "Setting of value for Photo failed: the value is not base64 text."),
    );
    expect(addOne("Notes", 5)).toEqual(
      refused(1016, "Setting of value for Notes failed: 5 is not a string; the field holds XML text."),
    );
  });

  it("refuses null, or no value, for a field that is not nullable", () => {
    expect(checkAdd(schema, { attributes: { Label: null } }, ADD)).toEqual(
      refused(1001, "Field: Label is not nullable. Cannot set null value."),
    );
    expect(checkAdd(schema, { attributes: {} }, ADD)).toEqual(
      refused(
        1001,
        "Field: Label is not nullable. Cannot set null value. The feature gives no value, and the field has no default value.",
      ),
    );
    expect(checkAdd(schema, { attributes: { Label: "a", Status: null } }, ADD)).toEqual(
      refused(1001, "Field: Status is not nullable. Cannot set null value."),
    );
    expect(addOne("Visits", null)).toEqual(accepted(null));
  });

  it("checks coded-value domains with codes compared as the field's type holds them", () => {
    expect(addOne("Status", "2")).toEqual(accepted(2));
    expect(addOne("Status", 3)).toEqual(
      refused(1016, "Setting of value for Status failed: 3 is not a code of domain 'StatusCodes' (1, 2)."),
    );
    expect(addOne("Kind", "A")).toEqual(accepted("A"));
    expect(addOne("Kind", "a")).toEqual(
      refused(1016, 'Setting of value for Kind failed: "a" is not a code of domain \'Kinds\' ("A", "B").'),
    );
  });

  it("checks range domains, bounds included", () => {
    expect(addOne("Depth", 0)).toEqual(accepted(0));
    expect(addOne("Depth", 100)).toEqual(accepted(100));
    expect(addOne("Depth", 100.5)).toEqual(
      refused(
        1016,
        "Setting of value for Depth failed: 100.5 is outside the range of domain 'DepthRange' (0 to 100).",
      ),
    );
    expect(addOne("Depth", -1)).toEqual(
      refused(
        1016,
        "Setting of value for Depth failed: -1 is outside the range of domain 'DepthRange' (0 to 100).",
      ),
    );
  });

  it("refuses a default value the field cannot hold", () => {
    const broken = layerSchema(
      {
        id: 2,
        name: "Broken",
        geometryType: "esriGeometryPoint",
        fields: [{ name: "N", type: "esriFieldTypeInteger", defaultValue: "many" }],
      },
      "layer",
      {},
    );
    expect(checkAdd(broken, { attributes: {} }, ADD)).toEqual(
      refused(
        1016,
        'Setting of value for N failed: the feature gives none, and the field\'s default value is not valid: "many" is not a number.',
      ),
    );
  });

  it("refuses a value for a field that is not editable", () => {
    expect(checkAdd(schema, { attributes: { Label: "a", Legacy: "x" } }, ADD)).toEqual(
      refused(1023, "Field: Legacy is not editable."),
    );
  });

  it("refuses a feature that is not an object, or attributes that are not one", () => {
    expect(checkAdd(schema, [1], ADD)).toEqual(
      refused(
        1000,
        "Non-specific edit content error: a feature is a JSON object with attributes and geometry, not [1].",
      ),
    );
    expect(checkAdd(schema, { attributes: ["Label"] }, ADD)).toEqual(
      refused(
        1000,
        'Non-specific edit content error: the feature\'s attributes are a JSON object of field names and values, not ["Label"].',
      ),
    );
  });

  it("stores no geometry for a feature without one, or with an empty one", () => {
    for (const geometry of [undefined, null, { x: null, y: null }, { x: "NaN", y: "NaN" }]) {
      expect(added(checkAdd(schema, { attributes: { Label: "a" }, geometry }, ADD)).geometry).toBeNull();
    }
  });

  it("refuses a geometry of another type or a malformed one", () => {
    expect(
      checkAdd(
        schema,
        {
          attributes: { Label: "a" },
          geometry: {
            paths: [
              [
                [0, 0],
                [1, 1],
              ],
            ],
          },
        },
        ADD,
      ),
    ).toEqual(
      refused(
        1015,
        "Geometry could not be set: geometry is a polyline but the layer holds esriGeometryPoint.",
      ),
    );
    expect(checkAdd(schema, { attributes: { Label: "a" }, geometry: { x: "a", y: 1 } }, ADD)).toEqual(
      refused(1015, 'Geometry could not be set: geometry x must be a finite number (got "a").'),
    );
    expect(checkAdd(schema, { attributes: { Label: "a" }, geometry: { x: 1, y: 2, z: 3 } }, ADD)).toEqual(
      refused(1015, "Geometry could not be set: geometry has Z values but the layer has no Z."),
    );
  });

  it("refuses a geometry without the Z or M values its layer has", () => {
    const zm = layerSchema(
      { id: 3, name: "ZM", geometryType: "esriGeometryPoint", hasZ: true, hasM: true },
      "layer",
      {},
    );
    expect(added(checkAdd(zm, { geometry: { x: 1, y: 2, z: 3, m: 4 } }, ADD)).geometry).toEqual({
      type: "esriGeometryPoint",
      x: 1,
      y: 2,
      z: 3,
      m: 4,
      hasZ: true,
      hasM: true,
    });
    expect(checkAdd(zm, { geometry: { x: 1, y: 2, m: 4 } }, ADD)).toEqual(
      refused(
        1014,
        "Geometry does not have z-values. The layer has z-values, and every geometry must carry them.",
      ),
    );
    expect(checkAdd(zm, { geometry: { x: 1, y: 2, z: 3 } }, ADD)).toEqual(
      refused(
        1002,
        "Geometry does not have m-values. The layer has m-values, and every geometry must carry them.",
      ),
    );
  });

  it("takes no geometry for a table", () => {
    const table = layerSchema(
      { id: 4, name: "Visits", fields: [{ name: "Note", type: "esriFieldTypeString" }] },
      "table",
      {},
    );
    expect(added(checkAdd(table, { attributes: { Note: "n" } }, ADD))).toEqual({
      columns: { f_note: "n" },
      geometry: null,
    });
    expect(checkAdd(table, { attributes: { Note: "n" }, geometry: { x: 1, y: 2 } }, ADD)).toEqual(
      refused(1015, "Geometry could not be set: table 4 holds no geometry; send its records without one."),
    );
  });
});

describe("checkUpdate", () => {
  it("changes only the fields it gives, and the edit date and editor", () => {
    const result = updated(
      checkUpdate(
        schema,
        { attributes: { objectid: 7, Visits: "3", Kind: null, Day: "2024-01-31" } },
        UPDATE,
      ),
    );
    expect(result).toEqual({
      objectId: 7,
      columns: { f_visits: 3, f_kind: null, f_day: "2024-01-31", f_editdate: NOW, f_editor: "ann" },
    });
    expect(result).not.toHaveProperty("geometry");
    expect(result).not.toHaveProperty("globalId");
  });

  it("ignores the GlobalID and editor-tracking values it gives", () => {
    const result = updated(
      checkUpdate(
        schema,
        {
          attributes: {
            OBJECTID: 7,
            GlobalID: "{74100804-E229-49B8-8CDC-9B5D3EF03EDA}",
            CreationDate: 5,
            Creator: "mallory",
            Editor: "mallory",
          },
        },
        UPDATE,
      ),
    );
    expect(result).toEqual({ objectId: 7, columns: { f_editdate: NOW, f_editor: "ann" } });
  });

  it("needs the object id of the feature it changes", () => {
    expect(checkUpdate(schema, { attributes: { Visits: 3 } }, UPDATE)).toEqual(
      refused(
        1011,
        "Object is missing: the feature has no OBJECTID attribute, which names the feature to update.",
      ),
    );
    expect(checkUpdate(schema, { attributes: { OBJECTID: null } }, UPDATE)).toEqual(
      refused(
        1011,
        "Object is missing: the feature has no OBJECTID attribute, which names the feature to update.",
      ),
    );
    for (const [given, shown] of [
      ["seven", '"seven"'],
      [-1, "-1"],
      [1.5, "1.5"],
    ] as const) {
      expect(checkUpdate(schema, { attributes: { OBJECTID: given } }, UPDATE)).toEqual(
        refused(1011, `Object is missing: OBJECTID ${shown} is not an object id (a non-negative integer).`),
      );
    }
    expect(updated(checkUpdate(schema, { attributes: { OBJECTID: "12" } }, UPDATE)).objectId).toBe(12);
  });

  it("names its feature by GlobalID with useGlobalIds", () => {
    const withGlobalIds = { ...UPDATE, useGlobalIds: true };
    expect(
      updated(
        checkUpdate(
          schema,
          { attributes: { OBJECTID: 7, GLOBALID: "1a9f8368-f9bb-428b-bb03-f45724362db5", Visits: 1 } },
          withGlobalIds,
        ),
      ),
    ).toEqual({
      globalId: "{1A9F8368-F9BB-428B-BB03-F45724362DB5}",
      columns: { f_visits: 1, f_editdate: NOW, f_editor: "ann" },
    });
    expect(checkUpdate(schema, { attributes: { OBJECTID: 7 } }, withGlobalIds)).toEqual(
      refused(1020, "Missing GlobalID. With useGlobalIds, an update names its feature by GlobalID."),
    );
    expect(checkUpdate(schema, { attributes: { GlobalID: "" } }, withGlobalIds)).toEqual(
      refused(1021, "Empty GlobalID. The feature's GlobalID is an empty string."),
    );
    expect(checkUpdate(schema, { attributes: { GlobalID: 12 } }, withGlobalIds)).toEqual(
      refused(1011, "Object is missing: GlobalID 12 is not a GlobalID ({8-4-4-4-12} hexadecimal digits)."),
    );
  });

  it("refuses useGlobalIds on a layer without a GlobalID field", () => {
    const plain = layerSchema({ id: 5, name: "Plain", geometryType: "esriGeometryPoint" }, "layer", {});
    expect(checkUpdate(plain, { attributes: { OBJECTID: 1 } }, { ...UPDATE, useGlobalIds: true })).toEqual(
      refused(
        1000,
        "Non-specific edit content error: layer 5 has no GlobalID field, so useGlobalIds cannot name its features.",
      ),
    );
  });

  it("applies the field rules to the values it gives", () => {
    expect(checkUpdate(schema, { attributes: { OBJECTID: 7, Label: null } }, UPDATE)).toEqual(
      refused(1001, "Field: Label is not nullable. Cannot set null value."),
    );
    expect(checkUpdate(schema, { attributes: { OBJECTID: 7, Legacy: "x" } }, UPDATE)).toEqual(
      refused(1023, "Field: Legacy is not editable."),
    );
    expect(checkUpdate(schema, { attributes: { OBJECTID: 7, Status: 9 } }, UPDATE)).toEqual(
      refused(1016, "Setting of value for Status failed: 9 is not a code of domain 'StatusCodes' (1, 2)."),
    );
  });

  it("replaces the geometry it gives, clears it for an empty one, and keeps it for null", () => {
    expect(
      updated(checkUpdate(schema, { attributes: { OBJECTID: 7 }, geometry: { x: 1, y: 2 } }, UPDATE))
        .geometry,
    ).toEqual({
      type: "esriGeometryPoint",
      x: 1,
      y: 2,
      hasZ: false,
      hasM: false,
    });
    const cleared = updated(
      checkUpdate(schema, { attributes: { OBJECTID: 7 }, geometry: { x: null } }, UPDATE),
    );
    expect(cleared).toHaveProperty("geometry", null);
    const kept = updated(checkUpdate(schema, { attributes: { OBJECTID: 7 }, geometry: null }, UPDATE));
    expect(kept).not.toHaveProperty("geometry");
  });

  it("refuses a geometry when the layer does not allow geometry updates", () => {
    const noGeometryUpdates = { ...UPDATE, allowGeometryUpdates: false };
    expect(
      checkUpdate(schema, { attributes: { OBJECTID: 7 }, geometry: { x: 1, y: 2 } }, noGeometryUpdates),
    ).toEqual(
      refused(
        1004,
        "Geometry update not allowed. The layer's allowGeometryUpdates is false; send the update without a geometry.",
      ),
    );
    expect(
      updated(checkUpdate(schema, { attributes: { OBJECTID: 7, Visits: 1 } }, noGeometryUpdates)),
    ).toEqual({
      objectId: 7,
      columns: { f_visits: 1, f_editdate: NOW, f_editor: "ann" },
    });
  });
});

describe("parseFeatureList", () => {
  it("reads a JSON array of features, and nothing from an absent or empty parameter", () => {
    expect(parseFeatureList('[{"attributes": {"a": 1}}, {}]', "adds")).toEqual({
      ok: true,
      value: [{ attributes: { a: 1 } }, {}],
    });
    for (const raw of [undefined, "", "  "])
      expect(parseFeatureList(raw, "updates")).toEqual({ ok: true, value: [] });
  });

  it("refuses text that is not a JSON array", () => {
    const notJson = parseFeatureList("[{", "adds");
    expect(notJson.ok).toBe(false);
    expect(!notJson.ok && notJson.reason).toMatch(/^is not valid JSON \(/);
    expect(parseFeatureList('{"attributes": {}}', "features")).toEqual({
      ok: false,
      reason: 'must be a JSON array of features, as in features=[{"attributes": {...}, "geometry": {...}}]',
    });
  });

  it(`refuses more than ${MAX_EDIT_FEATURES} features`, () => {
    const many = (n: number) => `[${Array.from({ length: n }, () => "{}").join(",")}]`;
    const atLimit = parseFeatureList(many(10_000), "adds");
    expect(atLimit.ok && atLimit.value.length).toBe(10_000);
    expect(parseFeatureList(many(10_001), "adds")).toEqual({
      ok: false,
      reason: "has 10001 features; one request takes at most 10000, send the rest in another",
    });
  });
});

describe("parseDeletes", () => {
  it("reads object ids as a comma-separated list or a JSON array", () => {
    expect(parseDeletes("37, 462")).toEqual({ ok: true, value: { objectIds: [37, 462] } });
    expect(parseDeletes("1,2,3")).toEqual({ ok: true, value: { objectIds: [1, 2, 3] } });
    expect(parseDeletes("[37, 462]")).toEqual({ ok: true, value: { objectIds: [37, 462] } });
    expect(parseDeletes('["5", 5]')).toEqual({ ok: true, value: { objectIds: [5, 5] } });
    expect(parseDeletes(undefined)).toEqual({ ok: true, value: { objectIds: [] } });
    expect(parseDeletes(" ")).toEqual({ ok: true, value: { objectIds: [] } });
  });

  it("refuses anything but non-negative integers", () => {
    expect(parseDeletes("1,,2")).toEqual({
      ok: false,
      reason: 'has "" at position 2, which is not an object id (a non-negative integer)',
    });
    expect(parseDeletes("-1")).toEqual({
      ok: false,
      reason: 'has "-1" at position 1, which is not an object id (a non-negative integer)',
    });
    expect(parseDeletes("[1, 2.5]")).toEqual({
      ok: false,
      reason: "has 2.5 at position 2, which is not an object id (a non-negative integer)",
    });
    expect(parseDeletes("[1,")).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^is not valid JSON \(/),
    });
  });

  it("reads GlobalIDs with useGlobalIds, in upper case with braces", () => {
    const options = { useGlobalIds: true };
    expect(
      parseDeletes(
        '["{1A9F8368-F9BB-428B-BB03-F45724362DB5}","6ce34136-ec3a-40d7-80bf-e1d9be33812a"]',
        options,
      ),
    ).toEqual({
      ok: true,
      value: {
        globalIds: ["{1A9F8368-F9BB-428B-BB03-F45724362DB5}", "{6CE34136-EC3A-40D7-80BF-E1D9BE33812A}"],
      },
    });
    expect(parseDeletes("{1a9f8368-f9bb-428b-bb03-f45724362db5}", options)).toEqual({
      ok: true,
      value: { globalIds: ["{1A9F8368-F9BB-428B-BB03-F45724362DB5}"] },
    });
    expect(parseDeletes("[37]", options)).toEqual({
      ok: false,
      reason:
        "has 37 at position 1, which is not a GlobalID ({8-4-4-4-12} hexadecimal digits; useGlobalIds is true)",
    });
  });

  it(`refuses more than ${MAX_EDIT_FEATURES} ids`, () => {
    const ids = Array.from({ length: 10_001 }, (_, i) => i + 1).join(",");
    expect(parseDeletes(ids)).toEqual({
      ok: false,
      reason: "names 10001 features; one request deletes at most 10000, send the rest in another",
    });
  });
});
