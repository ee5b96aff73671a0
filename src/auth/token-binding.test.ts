import { describe, expect, it } from "vitest";
import { clientGroup, normalizeIp, presenterAllowed, refererAllowed } from "./token-binding.js";

describe("referer-bound tokens", () => {
  it("accept pages of the same origin under the referer's path", () => {
    const bound = "https://maps.example.com/app";
    expect(refererAllowed(bound, "https://maps.example.com/app")).toBe(true);
    expect(refererAllowed(bound, "https://maps.example.com/app/")).toBe(true);
    expect(refererAllowed(bound, "https://maps.example.com/app/viewer.html?x=1")).toBe(true);
  });

  it("refuse another origin, scheme, port or path, and a missing referer", () => {
    const bound = "https://maps.example.com/app";
    expect(refererAllowed(bound, "https://evil.example.com/app")).toBe(false);
    expect(refererAllowed(bound, "http://maps.example.com/app")).toBe(false);
    expect(refererAllowed(bound, "https://maps.example.com:8443/app")).toBe(false);
    expect(refererAllowed(bound, "https://maps.example.com/apple")).toBe(false);
    expect(refererAllowed(bound, "https://maps.example.com/")).toBe(false);
    expect(refererAllowed(bound, "https://maps.example.com.evil.net/app")).toBe(false);
    expect(refererAllowed(bound, undefined)).toBe(false);
    expect(refererAllowed(bound, "")).toBe(false);
    expect(refererAllowed(bound, "not a url")).toBe(false);
  });

  it("take a referer without a scheme as a host and path, any scheme", () => {
    expect(refererAllowed("maps.example.com", "https://maps.example.com/index.html")).toBe(true);
    expect(refererAllowed("maps.example.com", "http://maps.example.com/")).toBe(true);
    expect(refererAllowed("maps.example.com/app", "https://maps.example.com/other")).toBe(false);
    expect(refererAllowed("maps.example.com", "https://other.example.com/")).toBe(false);
  });

  it("accept the same text for referers that are no URL (scripts)", () => {
    expect(refererAllowed("@esri/arcgis-rest-js", "@esri/arcgis-rest-js")).toBe(true);
    expect(refererAllowed("@esri/arcgis-rest-js", "https://esri/arcgis-rest-js")).toBe(false);
    expect(refererAllowed("", "")).toBe(false);
  });
});

describe("address-bound tokens", () => {
  it("accept only the bound address, IPv4-mapped IPv6 being the same address", () => {
    const from = (ip: string) => ({ referer: undefined, ip });
    expect(presenterAllowed("ip", "10.1.2.3", from("10.1.2.3"))).toBe(true);
    expect(presenterAllowed("ip", "10.1.2.3", from("::ffff:10.1.2.3"))).toBe(true);
    expect(presenterAllowed("ip", "10.1.2.3", from("10.1.2.4"))).toBe(false);
    expect(presenterAllowed("requestip", "::1", from("::1"))).toBe(true);
    expect(presenterAllowed("requestip", "::1", from("127.0.0.1"))).toBe(false);
    expect(presenterAllowed("unknown", "10.1.2.3", from("10.1.2.3"))).toBe(false);
    expect(normalizeIp("FE80::1")).toBe("fe80::1");
  });
});

describe("addresses", () => {
  it("are compared in their canonical text", () => {
    expect(normalizeIp("2001:0DB8:0000::0001")).toBe("2001:db8::1");
    expect(normalizeIp("::FFFF:10.1.2.3")).toBe("10.1.2.3");
    expect(normalizeIp("::ffff:a01:203")).toBe("10.1.2.3");
    expect(normalizeIp(" 10.1.2.3 ")).toBe("10.1.2.3");
    const from = (ip: string) => ({ referer: undefined, ip });
    expect(presenterAllowed("ip", normalizeIp("2001:0db8::1"), from("2001:db8:0::1"))).toBe(true);
    expect(presenterAllowed("ip", "2001:db8::1", from("2001:db8::2"))).toBe(false);
  });

  it("group IPv6 clients by /64 and IPv4 clients by address for fair shares", () => {
    expect(clientGroup("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(clientGroup("2001:DB8:1:2:ffff:eeee:dddd:cccc")).toBe("2001:db8:1:2::/64");
    expect(clientGroup("2001:db8:1:3::1")).not.toBe(clientGroup("2001:db8:1:2::1"));
    expect(clientGroup("10.0.0.1")).toBe("10.0.0.1");
    expect(clientGroup("::ffff:10.0.0.1")).toBe("10.0.0.1");
    expect(clientGroup("10.0.0.2")).not.toBe(clientGroup("10.0.0.1"));
  });
});
