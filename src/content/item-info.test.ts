import { describe, expect, it } from "vitest";
import { infoFileType, infoKind, itemInfoXml } from "./item-info.js";

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe("item info files", () => {
  it("takes JSON, XML, CFG, TXT, PBF and PNG files and names their kind by folder", () => {
    expect(infoFileType("metadata.xml", "metadata", Buffer.alloc(0))).toBe("application/xml");
    expect(infoFileType("config.json", undefined, Buffer.alloc(0))).toBe("application/json");
    expect(infoFileType("notes.TXT", undefined, Buffer.alloc(0))).toBe("text/plain; charset=utf-8");
    expect(infoFileType("logo.png", "images", PNG)).toBe("image/png");
    expect(infoKind("metadata", "metadata.xml")).toBe("info/metadata/metadata.xml");
    expect(infoKind(undefined, "a.json")).toBe("info/a.json");
  });

  it("refuses other types, names with paths, a PNG that is not one, the thumbnail folder and iteminfo.xml", () => {
    const reason = (name: string, folder?: string, head = Buffer.alloc(0)) => {
      try {
        infoFileType(name, folder, head);
        return "accepted";
      } catch (err) {
        return (err as { details: string[] }).details.join(" ");
      }
    };
    expect(reason("page.html")).toMatch(/'file'.*JSON, XML/);
    expect(reason("../x.json")).toMatch(/'file'/);
    expect(reason(".hidden.json")).toMatch(/'file'/);
    expect(reason("fake.png", undefined, Buffer.from("<svg"))).toMatch(/not a PNG/);
    expect(reason("a.png", "thumbnail", PNG)).toMatch(/'folderName'/);
    expect(reason("a.json", "a/b")).toMatch(/'folderName'/);
    expect(reason("iteminfo.xml")).toMatch(/made from the item/);
    expect(reason("iteminfo.xml", "copies")).toBe("accepted");
  });

  it("writes iteminfo.xml from the item, escaping its values", () => {
    const xml = itemInfoXml({
      id: "abc",
      title: "Roads <&> \u0001rivers",
      type: "Web Map",
      typeKeywords: ["Web Map", "<k>"],
      description: "",
      snippet: "s",
      tags: ["a", "b"],
      thumbnail: null,
      url: null,
      owner: "amy",
      created: 1,
      modified: 2,
    });
    expect(xml).toContain("<title>Roads &lt;&amp;&gt; rivers</title>");
    expect(xml).toContain("<typekeyword>&lt;k&gt;</typekeyword>");
    expect(xml).toContain("<tags>a,b</tags>");
    expect(xml).toContain("<description/>");
    expect(xml.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<ESRI_ItemInformation')).toBe(true);
  });
});
