import { PEER_HEADERS, type PeerEnvelope } from "../../collaboration/peer.js";
import { errors } from "../../errors.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

/**
 * portico's own endpoints, `/portico/...`, which ArcGIS does not have: `/portico/peer/<op>` is where
 * portals of a distributed collaboration call each other, with signed envelopes instead of tokens.
 */
export const porticoRoutes = [
  defineRoute({
    name: "collaborations.peer",
    methods: ["POST"],
    path: "/portico/peer/:op",
    // Portals authenticate each other with signed envelopes (checked by the peer endpoint), not tokens.
    auth: "none",
    // A batch carries items of up to 64 MB of data base64-encoded (`MAX_TRANSPORT_BYTES` in
    // peer-messages.ts), about 86 MB, with their thumbnails and metadata.
    bodyLimit: 110 * 1024 * 1024,
    // Anyone can reach this endpoint, and the signature that says who calls is inside the body:
    // a body over the first MB is read only from a participant the headers name.
    screenLargeBody: async (headers, services) => {
      const collaborationId = headers[PEER_HEADERS.collaboration];
      const from = headers[PEER_HEADERS.from];
      if (
        typeof collaborationId !== "string" ||
        typeof from !== "string" ||
        !(await services.peerEndpoint.knowsPeer(collaborationId, from))
      ) {
        throw errors.peerCallRefused();
      }
    },
    // The envelope (up to 110 MB) is parsed once, by the JSON body parser, and used as parsed.
    parsedJsonBody: true,
    params: {
      envelope: p.json<PeerEnvelope, true>(
        {
          type: "object",
          properties: {
            collaborationId: { type: "string" },
            from: { type: "string" },
            to: { type: "string" },
            op: { type: "string" },
            issued: { type: "number" },
            nonce: { type: "string" },
            body: { type: "object" },
          },
          required: ["collaborationId", "from", "to", "op", "issued", "nonce", "body"],
        },
        { required: true },
      ),
      signature: p.string({ required: true, maxLength: 200 }),
    },
    // Every answer is signed, errors included, bound to the request it answers (`peer.ts`).
    answerHeaders: (body, status, payload, services) =>
      services.peerEndpoint.answerHeaders(body, status, payload),
    handler: async ({ params, path, headers, services }) => {
      // The headers that let the body in must name the sender the signed envelope names: a call
      // may not borrow a known participant's name to be read, then speak as someone else.
      const named = [
        [headers[PEER_HEADERS.collaboration], params.envelope.collaborationId],
        [headers[PEER_HEADERS.from], params.envelope.from],
      ];
      if (named.some(([header, signed]) => header !== undefined && header !== signed))
        throw errors.peerCallRefused();
      if (params.envelope.op !== path.op)
        throw errors.invalidParameter("envelope", "names another operation than the URL");
      return services.peerEndpoint.answer(params.envelope, params.signature);
    },
  }),
];
