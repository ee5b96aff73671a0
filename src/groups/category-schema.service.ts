import type { Caller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import type { CategoryNode } from "./category-schema.js";
import type { GroupService } from "./group.service.js";

/**
 * A group's category schema: read by whoever may see the group, assigned and deleted by its
 * managers (owner, group managers, administrators who update groups). One document per group,
 * replaced whole, going with the group.
 */
export class CategorySchemaService {
  constructor(
    private readonly db: Db,
    private readonly groups: GroupService,
  ) {}

  async get(caller: Caller | null, groupId: string): Promise<{ categorySchema: CategoryNode[] }> {
    await this.groups.seen(caller, groupId);
    const row = await this.db.kysely
      .selectFrom("group_category_schemas")
      .select("schema")
      .where("group_id", "=", groupId)
      .executeTakeFirst();
    return { categorySchema: row ? (JSON.parse(row.schema) as CategoryNode[]) : [] };
  }

  async assign(caller: Caller | null, groupId: string, schema: readonly CategoryNode[]): Promise<void> {
    await this.db.transaction(async (trx) => {
      await this.groups.managed(trx, caller, groupId, "assign a category schema to");
      const row = { group_id: groupId, schema: JSON.stringify(schema), modified: Date.now() };
      await trx
        .insertInto("group_category_schemas")
        .values(row)
        .onConflict((oc) => oc.column("group_id").doUpdateSet({ schema: row.schema, modified: row.modified }))
        .execute();
    });
  }

  async delete(caller: Caller | null, groupId: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      await this.groups.managed(trx, caller, groupId, "delete the category schema of");
      await trx.deleteFrom("group_category_schemas").where("group_id", "=", groupId).execute();
    });
  }
}
