import { errors } from "../../errors.js";
import { httpUrlProblem } from "../../outbound/guard.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { type JsonSchema, p } from "../../validation/params.js";
import type { WebhookConfig } from "../../webhooks/delivery-rules.js";
import { secretProblem } from "../../webhooks/signature.js";
import { WEBHOOK_PRIVILEGE } from "../../webhooks/webhook.service.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";

/** Organization webhooks, `wire.md` §7. Administrators only (portal:admin:manageWebhooks). */

const base = "/portals/:portalId/webhooks";
const one = `${base}/:webhookId`;

const CONFIG_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    deactivationPolicy: {
      type: "object",
      properties: {
        numberOfFailures: { type: "integer", minimum: 1, maximum: 1000 },
        daysInPast: { type: "integer", minimum: 1, maximum: 365 },
      },
      required: ["numberOfFailures", "daysInPast"],
      additionalProperties: false,
    },
    sendSecretHeader: { type: "boolean" },
  },
  additionalProperties: false,
};

const webhookParams = {
  name: p.string({ maxLength: 256 }),
  url: p.string({ maxLength: 2048, check: httpUrlProblem }),
  secret: p.string({ maxLength: 256, check: secretProblem }),
  config: p.json<WebhookConfig>(CONFIG_SCHEMA),
  changes: p.string({ enum: ["allChanges", "manualChanges"] }),
  events: p.list({ maxItems: 100, item: { maxLength: 300 } }),
};

export const portalsWebhooksRoutes = [
  defineRoute({
    name: "webhooks.list",
    methods: ["GET", "POST"],
    path: base,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: { ...pagingParams },
    handler: async ({ params, caller, services }) => services.webhooks.list(caller, pageOf(params)),
  }),
  defineRoute({
    name: "webhooks.create",
    methods: ["POST"],
    path: `${base}/createWebhook`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {
      ...webhookParams,
      name: p.string({ required: true, minLength: 1, maxLength: 256 }),
      url: p.string({ required: true, maxLength: 2048, check: httpUrlProblem }),
      changes: p.string({ required: true, enum: ["allChanges", "manualChanges"] }),
    },
    handler: async ({ params, caller, services }) => {
      const webhook = await services.webhooks.create(caller, {
        name: params.name,
        url: params.url,
        secret: params.secret,
        config: params.config,
        changes: params.changes,
        events: params.events,
      });
      return ok({ webhook });
    },
  }),
  defineRoute({
    name: "webhooks.settings",
    methods: ["GET", "POST"],
    path: `${base}/settings`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {},
    handler: async ({ caller, services }) => services.webhooks.settings(caller),
  }),
  defineRoute({
    name: "webhooks.settings.update",
    methods: ["POST"],
    path: `${base}/settings/update`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {
      notificationAttempts: p.integer({ min: 0, max: 5 }),
      notificationTimeOutInSeconds: p.integer({ min: 0, max: 60 }),
      notificationElapsedTimeInSeconds: p.integer({ min: 1, max: 100 }),
    },
    handler: async ({ params, caller, services }) => {
      const settings = await services.webhooks.updateSettings(caller, {
        ...(params.notificationAttempts !== undefined
          ? { notificationAttempts: params.notificationAttempts }
          : {}),
        ...(params.notificationTimeOutInSeconds !== undefined
          ? { notificationTimeOutInSeconds: params.notificationTimeOutInSeconds }
          : {}),
        ...(params.notificationElapsedTimeInSeconds !== undefined
          ? { notificationElapsedTimeInSeconds: params.notificationElapsedTimeInSeconds }
          : {}),
      });
      return ok(settings);
    },
  }),
  defineRoute({
    name: "webhooks.get",
    methods: ["GET", "POST"],
    path: one,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => services.webhooks.get(caller, path.webhookId),
  }),
  defineRoute({
    name: "webhooks.update",
    methods: ["POST"],
    path: `${one}/update`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: webhookParams,
    handler: async ({ params, path, caller, services }) => {
      const webhook = await services.webhooks.update(caller, path.webhookId, {
        ...(params.name !== undefined ? { name: params.name } : {}),
        ...(params.url !== undefined ? { url: params.url } : {}),
        ...(params.secret !== undefined ? { secret: params.secret } : {}),
        ...(params.config !== undefined ? { config: params.config } : {}),
        ...(params.changes !== undefined ? { changes: params.changes } : {}),
        ...(params.events !== undefined ? { events: params.events } : {}),
      });
      return ok({ webhook });
    },
  }),
  defineRoute({
    name: "webhooks.delete",
    methods: ["POST"],
    path: `${one}/delete`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.webhooks.delete(caller, path.webhookId);
      return ok();
    },
  }),
  defineRoute({
    name: "webhooks.activate",
    methods: ["POST"],
    path: `${one}/activate`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.webhooks.setActive(caller, path.webhookId, true);
      return ok();
    },
  }),
  defineRoute({
    name: "webhooks.deactivate",
    methods: ["POST"],
    path: `${one}/deactivate`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.webhooks.setActive(caller, path.webhookId, false);
      return ok();
    },
  }),
  defineRoute({
    name: "webhooks.notificationStatus",
    methods: ["GET", "POST"],
    path: `${one}/notificationStatus`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: { ...pagingParams },
    handler: async ({ params, path, caller, services }) =>
      services.webhooks.notificationStatus(caller, path.webhookId, pageOf(params)),
  }),
  defineRoute({
    name: "webhooks.redeliver",
    methods: ["POST"],
    path: `${one}/redeliver`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {
      notificationId: p.string({ maxLength: 64 }),
      since: p.integer({ min: 0 }),
    },
    check(params) {
      if ((params.notificationId === undefined) === (params.since === undefined)) {
        throw errors.invalidParameter(
          "notificationId",
          "give either notificationId (one notification) or since (every failed one since that time)",
        );
      }
    },
    handler: async ({ params, path, caller, services }) => {
      const redelivered = await services.webhooks.redeliver(caller, path.webhookId, {
        ...(params.notificationId !== undefined ? { notificationId: params.notificationId } : {}),
        ...(params.since !== undefined ? { since: params.since } : {}),
      });
      return ok({ redelivered });
    },
  }),
  defineRoute({
    name: "webhooks.ping",
    methods: ["POST"],
    path: `${one}/ping`,
    auth: "required",
    privilege: WEBHOOK_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      ok({ notificationId: await services.webhooks.ping(caller, path.webhookId) }),
  }),
];
