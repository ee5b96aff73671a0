/**
 * A group's category schema (`community/groups/<id>/assignCategorySchema`): trees of titled
 * categories whose paths (`/Categories/Water/Rivers`) items of the group are sorted by. Checked
 * here, as pure code, before anything is stored.
 */
export interface CategoryNode {
  title: string;
  description?: string;
  categories: CategoryNode[];
}

/** Roots of one schema, categories in all, levels below a root, characters of a title. */
export const CATEGORY_SCHEMA_LIMITS = { roots: 3, categories: 1000, levels: 4, title: 100 } as const;

/**
 * The schema in the form ArcGIS answers it, from what assignCategorySchema took: the object
 * `{"categorySchema": [...]}` or the bare array. Answers the reason it is refused.
 */
export function checkCategorySchema(value: unknown): CategoryNode[] | string {
  const roots =
    typeof value === "object" && value !== null && !Array.isArray(value) && "categorySchema" in value
      ? (value as { categorySchema: unknown }).categorySchema
      : value;
  if (!Array.isArray(roots)) return 'must be {"categorySchema": [...]} or an array of categories';
  if (roots.length > CATEGORY_SCHEMA_LIMITS.roots) {
    return `must have at most ${CATEGORY_SCHEMA_LIMITS.roots} root categories`;
  }
  let count = 0;
  const walk = (node: unknown, level: number, path: string): CategoryNode | string => {
    if (typeof node !== "object" || node === null || Array.isArray(node)) {
      return `has an entry under '${path || "/"}' that is not a category object`;
    }
    const { title, description, categories } = node as Record<string, unknown>;
    if (typeof title !== "string" || title.trim() === "")
      return `has a category under '${path || "/"}' without a title`;
    if ([...title].length > CATEGORY_SCHEMA_LIMITS.title) {
      return `has the title '${title.slice(0, 40)}…', longer than ${CATEGORY_SCHEMA_LIMITS.title} characters`;
    }
    if (title.includes("/")) return `has the title '${title}', which contains '/', the path separator`;
    if (description !== undefined && typeof description !== "string")
      return `has a description of '${path}/${title}' that is not text`;
    if (++count > CATEGORY_SCHEMA_LIMITS.categories) {
      return `has more than ${CATEGORY_SCHEMA_LIMITS.categories} categories`;
    }
    const here = `${path}/${title}`;
    if (categories !== undefined && !Array.isArray(categories))
      return `has 'categories' of '${here}' that is not an array`;
    const children = (categories ?? []) as unknown[];
    if (children.length > 0 && level >= CATEGORY_SCHEMA_LIMITS.levels) {
      return `nests categories deeper than ${CATEGORY_SCHEMA_LIMITS.levels} levels below '${here.split("/").slice(0, 2).join("/")}'`;
    }
    const out: CategoryNode[] = [];
    const titles = new Set<string>();
    for (const child of children) {
      const checked = walk(child, level + 1, here);
      if (typeof checked === "string") return checked;
      if (titles.has(checked.title.toLowerCase()))
        return `has two categories titled '${checked.title}' under '${here}'`;
      titles.add(checked.title.toLowerCase());
      out.push(checked);
    }
    return { title, ...(description !== undefined ? { description } : {}), categories: out };
  };
  const out: CategoryNode[] = [];
  for (const root of roots) {
    const checked = walk(root, 0, "");
    if (typeof checked === "string") return checked;
    out.push(checked);
  }
  return out;
}
