import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { deliveryHeaders, secretProblem, signingKey } from "./signature.js";

const hmac = (key: Buffer, text: string) => createHmac("sha256", key).update(text).digest("base64");

describe("signingKey", () => {
  it("uses the UTF-8 bytes of a plain secret", () => {
    expect(signingKey("s3cret-é")).toEqual(Buffer.from([...Buffer.from("s3cret-"), 0xc3, 0xa9]));
  });

  it("uses the base64-decoded bytes after whsec_, as Standard Webhooks libraries do", () => {
    expect(signingKey("whsec_AQID/w==")).toEqual(Buffer.from([1, 2, 3, 255]));
  });
});

describe("secretProblem", () => {
  it("accepts plain secrets, the empty secret and whsec_ secrets holding base64", () => {
    for (const secret of ["", "plain", "whsec_AQID/w=="])
      expect(secretProblem(secret), secret).toBeUndefined();
  });

  it("refuses a whsec_ secret whose rest is empty or not base64", () => {
    for (const secret of ["whsec_", "whsec_not base64!", "whsec_===="]) {
      expect(secretProblem(secret), secret).toMatch(/not base64/);
    }
  });
});

describe("deliveryHeaders", () => {
  const when = new Date(1_700_000_000_987);
  const body = '{"events":[]}';

  it("sends the id and the attempt's timestamp in seconds, and signs nothing without a secret", () => {
    expect(deliveryHeaders("n1", body, "", when)).toEqual({
      "webhook-id": "n1",
      "webhook-timestamp": "1700000000",
    });
  });

  it("signs id, timestamp and body the Standard Webhooks way, and the body alone the ArcGIS way", () => {
    const key = Buffer.from("topsecret", "utf8");
    expect(deliveryHeaders("n1", body, "topsecret", when)).toEqual({
      "webhook-id": "n1",
      "webhook-timestamp": "1700000000",
      "webhook-signature": `v1,${hmac(key, `n1.1700000000.${body}`)}`,
      "x-esriHook-Signature": `sha256=${hmac(key, body)}`,
    });
  });

  it("signs with the decoded key of a whsec_ secret", () => {
    const headers = deliveryHeaders("n2", body, "whsec_AQID/w==", when);
    expect(headers["webhook-signature"]).toBe(
      `v1,${hmac(Buffer.from([1, 2, 3, 255]), `n2.1700000000.${body}`)}`,
    );
  });
});
