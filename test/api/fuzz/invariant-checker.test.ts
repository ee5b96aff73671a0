import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findInvalidRows } from "../../helpers/invariants.js";
import { ADMIN, engine, startTestPortal, type TestPortal } from "../../helpers/portico.js";

/**
 * The fuzz suite's oracle (`helpers/invariants.ts`) is only as good as its ability to fail: a
 * checker that finds nothing would let every fuzzed write pass. So each rule gets one bad row
 * planted in a throwaway store, and each must be reported.
 */

describe(`the database invariant checker (${engine})`, () => {
  let store: TestPortal;

  beforeAll(async () => {
    store = await startTestPortal();
  }, 60_000);
  afterAll(async () => {
    await store?.stop();
  });

  it("finds nothing in a fresh store and every planted invalid row", async () => {
    const db = store.portico.db;
    expect(await findInvalidRows(db)).toEqual([]);
    const now = Date.now();
    const admin = await db.kysely
      .selectFrom("users")
      .select("id")
      .where("username", "=", ADMIN.username)
      .executeTakeFirstOrThrow();
    await db.transaction(async (trx) => {
      await trx
        .insertInto("users")
        .values({
          id: "baduser",
          username: "bad user!",
          username_key: "BAD USER!",
          full_name: "",
          first_name: "",
          last_name: "",
          email: "not-an-email",
          description: "",
          password_hash: "x",
          role: "org_superuser",
          role_id: null,
          disabled: 0,
          provider: "arcgis",
          user_type: "creatorUT",
          access: "org",
          culture: null,
          region: null,
          units: null,
          tags: "[1,2]",
          created: now,
          modified: now,
          last_login: -1,
        })
        .execute();
      await trx
        .insertInto("items")
        .values({
          id: "baditem",
          owner_id: admin.id,
          owner: "someone_else",
          owner_key: "someone_else",
          folder_id: null,
          title: "",
          title_key: "",
          type: "Web Map",
          type_key: "web map",
          type_keywords: "[]",
          description: "",
          snippet: "",
          tags: "{not json",
          url: null,
          properties: "[]",
          access: "shared",
          protected: 0,
          size: 0,
          thumbnail: null,
          created: now,
          modified: now,
        })
        .execute();
      // A file whose chunks do not add up to its size (nor to its item's).
      await trx
        .insertInto("item_files")
        .values({
          item_id: "baditem",
          kind: "data",
          name: "d",
          content_type: "text/plain",
          file_id: "badfile",
          size: 10,
        })
        .execute();
      await trx
        .insertInto("item_file_chunks")
        .values({ file_id: "badfile", seq: 0, data: Buffer.from("abc") })
        .execute();
      await trx
        .insertInto("roles")
        .values({
          id: "badrole",
          name: "Bad",
          name_key: "bad",
          description: "",
          privileges: '["portal:admin:everything"]',
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("groups")
        .values({
          id: "badgroup",
          owner_id: admin.id,
          owner: ADMIN.username,
          title: "Ownerless",
          title_key: "ownerless",
          description: "",
          snippet: "",
          tags: "[]",
          access: "everyone",
          is_invitation_only: 0,
          is_view_only: 0,
          protected: 0,
          sort_field: "title",
          sort_order: "asc",
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("collaborations")
        .values({
          id: "badcollab",
          name: "Hostless",
          description: "",
          role: "host",
          host_portal_id: "x",
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("workspaces")
        .values({
          id: "badws",
          collaboration_id: "badcollab",
          name: "ws",
          description: "",
          config: '{"maxItemSizeInMB":0}',
          last_sync_success: -1,
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("workspace_links")
        .values({
          workspace_id: "badws",
          group_id: "no-such-group",
          realtime: 0,
          copy_feature_data: 0,
          copy_by_ref_if_copy_fail: 0,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("webhooks")
        .values({
          id: "badhook",
          name: "bad",
          payload_url: "ftp://files.invalid/x",
          secret: "",
          is_active: 1,
          changes: "manualChanges",
          events: '["/nothing"]',
          config: '{"deactivationPolicy":{"numberOfFailures":0,"daysInPast":1}}',
          owner_id: admin.id,
          modified_id: admin.id,
          count_since: now,
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("notifications")
        .values({
          id: "badnote",
          webhook_id: "badhook",
          event_id: "no-such-event",
          payload: "{}",
          status: "lost" as "failed",
          attempts: 0,
          total_attempts: 0,
          next_attempt: now,
          lease_until: 0,
          created: now,
          completed: null,
          last_status: null,
          last_response: "",
        })
        .execute();
      // A tag without its item_tags row; a service whose item is no service and whose layers share
      // an id; an invitation of a user already in the group; a token that expired when made.
      await trx
        .insertInto("items")
        .values({
          id: "tagitem",
          owner_id: admin.id,
          owner: ADMIN.username,
          owner_key: ADMIN.username,
          folder_id: null,
          title: "Tagged",
          title_key: "tagged",
          type: "Web Map",
          type_key: "web map",
          type_keywords: "[]",
          description: "",
          snippet: "",
          tags: '["Lost"]',
          categories: '["/Categories/Lost"]',
          extent_xmin: 5,
          extent_ymin: 0,
          extent_xmax: 1,
          extent_ymax: 1,
          url: null,
          properties: null,
          access: "private",
          protected: 0,
          size: 0,
          thumbnail: null,
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("feature_services")
        .values({
          item_id: "tagitem",
          name: "bad name",
          name_key: "bad name",
          definition: "{}",
          layers: '[{"id":1,"name":"a"},{"id":1,"name":"b"}]',
          tables: "[]",
          is_view: 0,
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("group_members")
        .values({
          group_id: "badgroup",
          user_id: admin.id,
          username: ADMIN.username,
          member_type: "member",
          joined: now,
        })
        .execute();
      await trx
        .insertInto("group_invitations")
        .values({
          id: "badinvite",
          group_id: "badgroup",
          user_id: admin.id,
          username: ADMIN.username,
          invited_by: ADMIN.username,
          created: now,
        })
        .execute();
      await trx
        .insertInto("group_applications")
        .values({ group_id: "badgroup", user_id: admin.id, username: ADMIN.username, received: now })
        .execute();
      await trx
        .insertInto("tokens")
        .values({
          token_hash: "badtoken",
          user_id: admin.id,
          created: now,
          expires: now - 1,
          client: "ip",
          referer: "",
        })
        .execute();
      const org = await trx.selectFrom("organizations").select(["id", "settings"]).executeTakeFirstOrThrow();
      const settings = { ...JSON.parse(org.settings), homePageFeaturedContentCount: 500, bogus: 1 };
      await trx
        .updateTable("organizations")
        .set({
          settings: JSON.stringify(settings),
          security_policy: JSON.stringify({ passwordPolicy: { minLength: 3 } }),
        })
        .execute();
    });
    if (db.engine === "sqlite") {
      // A declared foreign key, broken behind the database's back (only SQLite lets a test do so).
      await sql`PRAGMA foreign_keys = OFF`.execute(db.writer);
      await sql`INSERT INTO item_shares (item_id, group_id) VALUES ('no-such-item', 'badgroup')`.execute(
        db.writer,
      );
      await sql`PRAGMA foreign_keys = ON`.execute(db.writer);
      // NUL, which SQLite stores and PostgreSQL refuses.
      await db.transaction((trx) =>
        trx
          .insertInto("folders")
          .values({
            id: "nulfolder",
            owner_id: admin.id,
            title: "a\u0000b",
            title_key: "a\u0000b",
            created: now,
          })
          .execute(),
      );
    }

    const found = await findInvalidRows(db);
    const expected = [
      /^username: users bad user!: does not match/,
      /^key: users\.username_key/,
      /^email: users bad user!: not-an-email/,
      /^enum: users\.role: 1 row\(s\) hold org_superuser/,
      /^json: users\.tags of baduser: not an array of strings/,
      /^required text: items\.title/,
      /^json: items\.tags of baditem: not JSON/,
      /^json: items\.properties of baditem: not an object/,
      /^owner: items baditem/,
      /^access: items baditem: access shared/,
      /^privilege: roles badrole/,
      /^enum: groups\.access/,
      /^group owner: groups badgroup/,
      /^collaboration: collaborations badcollab: 0 hosts/,
      /^workspace config: workspaces badws/,
      /^orphan: workspace_links\.group_id = no-such-group/,
      /^webhook url: webhooks badhook/,
      /^webhook events: webhooks badhook: \/nothing is not a trigger URI/,
      /^webhook config: webhooks badhook: deactivationPolicy/,
      /^orphan: notifications\.event_id = no-such-event/,
      /^enum: notifications\.status/,
      /^setting: organizations\.settings\.bogus: unknown setting/,
      /^setting: organizations\.settings\.homePageFeaturedContentCount: invalid value 500/,
      /^security policy: organizations\.security_policy\.passwordPolicy\.minLength: invalid value 3/,
      /^tags: item_tags of tagitem/,
      /^categories: item_categories of tagitem/,
      /^extent: items tagitem/,
      /^service name: feature_services bad name/,
      /^service item: feature_services bad name: item type Web Map/,
      /^service layers: feature_services bad name: duplicate ids/,
      /^invitation: group_invitations of badgroup/,
      /^application: group_applications of badgroup/,
      /^token: tokens of /,
      /^file: item_files baditem data: size 10 but its chunks hold 3 bytes/,
      /^file: item_files baditem data: the item's size is 0/,
      ...(db.engine === "sqlite"
        ? [
            /^foreign key: item_shares rowid \d+: no row in items/,
            /^orphan: item_shares\.item_id = no-such-item/,
            /^nul: folders\.title of nulfolder/,
          ]
        : []),
    ];
    for (const rule of expected) {
      expect(
        found.some((line) => rule.test(line)),
        `${rule} in\n${found.join("\n")}`,
      ).toBe(true);
    }
  });
});
