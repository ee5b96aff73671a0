import { type WordQuery, wordQuery } from "../content/words.js";
import { errors } from "../errors.js";

/**
 * The ArcGIS search syntax (`q`) as far as clients commonly use it: words and "quoted phrases",
 * `field:value` and `field:"quoted value"`, `field:(a OR b)`, the upper-case operators `AND`, `OR`
 * and `NOT`, and parentheses. Adjacent terms are AND-ed, as the ArcGIS default operator does. The
 * result is a small tree that the search service compiles to SQL; parsing never touches the
 * database, so a malformed query costs nothing.
 */
export type QueryNode =
  | { kind: "all" }
  | { kind: "and"; children: QueryNode[] }
  | { kind: "or"; children: QueryNode[] }
  | { kind: "not"; child: QueryNode }
  /** `field` null: a bare word or phrase, matched against title, tags, description and snippet. */
  | { kind: "term"; field: string | null; value: string };

export const ITEM_FIELDS = ["title", "owner", "type", "tags", "group", "id", "access", "orgid"] as const;
export const GROUP_FIELDS = ["title", "owner", "tags", "id", "access", "orgid"] as const;
/** Fields of a user search; `email` only for callers who view users (see `SearchService.searchUsers`). */
export const USER_FIELDS = [
  "username",
  "fullname",
  "firstname",
  "lastname",
  "email",
  "role",
  "access",
  "orgid",
] as const;

/** Longest accepted `q`; a query is a filter, not a document. */
export const MAX_QUERY_LENGTH = 2048;
/** Nesting and term limits keep a hostile query from building a huge SQL statement. */
const MAX_DEPTH = 32;
const MAX_TERMS = 64;
/** Words in one phrase: each is one more index lookup joined by position. */
const MAX_PHRASE_WORDS = 16;
/**
 * Words of all word terms together, each distinct term counted once (a repeated term is looked up
 * once): every word is one more index lookup, which on SQLite runs whole before the search's
 * deadline is looked at again.
 */
const MAX_WORDS = 128;
/** A shorter prefix (`a*`) reads a large part of the index. */
const MIN_PREFIX_LENGTH = 2;
/** Fields matched by words (`content/words.ts`); the others compare whole values. */
const WORD_FIELDS: ReadonlySet<string | null> = new Set([null, "title"]);

type Token =
  | { t: "(" | ")" | "AND" | "OR" | "NOT"; at: number }
  | { t: "field"; name: string; at: number }
  | { t: "value"; value: string; quoted: boolean; at: number };

/**
 * Parses `q`. Field names are case-insensitive and must be among `fields`; an empty query matches
 * everything. Throws the 400 invalid-parameter error naming `q`.
 */
export function parseQuery(q: string, fields: readonly string[], param = "q"): QueryNode {
  const bad = refuse(param);
  // Code units first: that costs nothing, whatever the length; a query of more code units than
  // twice the limit has more characters than the limit, and one below it is short to count.
  if (q.length > 2 * MAX_QUERY_LENGTH || [...q].length > MAX_QUERY_LENGTH) {
    bad(`must be at most ${MAX_QUERY_LENGTH} characters`);
  }
  const parser = new Parser(tokenize(q, bad), new Set(fields), bad);
  return parser.parse();
}

/**
 * `filter`, the field-match companion of `q`: the same syntax, but every term names a field and
 * matches that field's whole value (`title:"City Parks"` is that title, not its words), as the
 * ArcGIS search reference describes it ("an exact keyword match of the expected value").
 */
export function parseFilter(filter: string, fields: readonly string[]): QueryNode {
  const node = parseQuery(filter, fields, "filter");
  return exactTitles(node, refuse("filter"));
}

function exactTitles(node: QueryNode, bad: Refuse): QueryNode {
  switch (node.kind) {
    case "all":
      return node;
    case "and":
    case "or":
      return { kind: node.kind, children: node.children.map((c) => exactTitles(c, bad)) };
    case "not":
      return { kind: "not", child: exactTitles(node.child, bad) };
    case "term":
      if (node.field === null) bad(`has the bare term '${node.value}'; a filter term is field:"value"`);
      return node.field === "title" ? { ...node, field: EXACT_TITLE } : node;
  }
}

/** The field of an exact title match, which only `filter` produces (no `q` can name it). */
export const EXACT_TITLE = "title=";

type Refuse = (reason: string) => never;

function refuse(param: string): Refuse {
  return (reason) => {
    throw errors.invalidParameter(param, reason);
  };
}

function tokenize(q: string, bad: Refuse): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < q.length) {
    const c = q[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === "(" || c === ")") {
      out.push({ t: c, at: i });
      i++;
      continue;
    }
    if (c === '"') {
      const end = q.indexOf('"', i + 1);
      if (end < 0) bad(`has an unbalanced quote at position ${i + 1}`);
      out.push({ t: "value", value: q.slice(i + 1, end), quoted: true, at: i });
      i = end + 1;
      continue;
    }
    const start = i;
    while (i < q.length && !/[\s()"]/.test(q[i] as string) && q[i] !== ":") i++;
    const word = q.slice(start, i);
    // `name:` introduces a field; a colon that follows nothing (":x") is part of a word.
    if (q[i] === ":" && word !== "") {
      out.push({ t: "field", name: word.toLowerCase(), at: start });
      i++;
      // A field's plain value runs to the next space or parenthesis, colons included (`id:a:b`).
      const valueStart = i;
      while (i < q.length && !/[\s()"]/.test(q[i] as string)) i++;
      if (i > valueStart)
        out.push({ t: "value", value: q.slice(valueStart, i), quoted: false, at: valueStart });
      continue;
    }
    if (q[i] === ":") {
      i++;
      while (i < q.length && !/[\s()"]/.test(q[i] as string)) i++;
    }
    const text = q.slice(start, i);
    if (text === "AND" || text === "OR" || text === "NOT") out.push({ t: text, at: start });
    else out.push({ t: "value", value: text, quoted: false, at: start });
  }
  return out;
}

class Parser {
  private pos = 0;
  private depth = 0;
  private terms = 0;
  /** The words of each distinct word term, by field and words (see `MAX_WORDS`). */
  private readonly wordTerms = new Map<string, number>();
  private words = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly fields: ReadonlySet<string>,
    private readonly bad: Refuse,
  ) {}

  parse(): QueryNode {
    if (this.tokens.length === 0) return { kind: "all" };
    const node = this.or(null);
    const rest = this.tokens[this.pos];
    if (rest) {
      if (rest.t === ")") this.bad(`has an unbalanced ')' at position ${rest.at + 1}`);
      this.bad(`has an unexpected '${describe(rest)}' at position ${rest.at + 1}`);
    }
    return node;
  }

  private peek(): Token | undefined {
    return this.tokens[this.pos];
  }

  private or(field: string | null): QueryNode {
    const children = [this.and(field)];
    while (this.peek()?.t === "OR") {
      this.pos++;
      children.push(this.and(field));
    }
    return combine("or", children);
  }

  private and(field: string | null): QueryNode {
    const children = [this.unary(field)];
    for (;;) {
      const next = this.peek();
      if (!next || next.t === ")" || next.t === "OR") break;
      if (next.t === "AND") this.pos++;
      children.push(this.unary(field));
    }
    return combine("and", children);
  }

  private unary(field: string | null): QueryNode {
    if (this.peek()?.t === "NOT") {
      this.pos++;
      return { kind: "not", child: this.unary(field) };
    }
    return this.primary(field);
  }

  private primary(field: string | null): QueryNode {
    const token = this.peek();
    if (!token) this.bad("ends where a search term was expected");
    this.pos++;
    switch (token.t) {
      case "(": {
        if (++this.depth > MAX_DEPTH) this.bad(`nests parentheses more than ${MAX_DEPTH} deep`);
        const inner = this.or(field);
        const close = this.peek();
        if (close?.t !== ")") this.bad(`has an unbalanced '(' at position ${token.at + 1}`);
        this.pos++;
        this.depth--;
        return inner;
      }
      case "field": {
        if (field !== null) this.bad(`has a field inside the field '${field}' at position ${token.at + 1}`);
        if (!this.fields.has(token.name)) {
          this.bad(`uses the unknown field '${token.name}' (known fields: ${[...this.fields].join(", ")})`);
        }
        const next = this.peek();
        if (next?.t !== "value" && next?.t !== "(") {
          this.bad(`has no value after '${token.name}:' at position ${token.at + 1}`);
        }
        return this.primary(token.name);
      }
      case "value": {
        if (++this.terms > MAX_TERMS) this.bad(`has more than ${MAX_TERMS} search terms`);
        if (token.value === "*" && !token.quoted) return { kind: "all" };
        if (WORD_FIELDS.has(field)) this.countWords(field, checkWords(token.value, token.at, this.bad));
        return { kind: "term", field, value: token.value };
      }
      default:
        this.bad(`has an unexpected '${describe(token)}' at position ${token.at + 1}`);
    }
  }

  private countWords(field: string | null, query: WordQuery): void {
    if (query.kind !== "words") return;
    const key = `${field}|${query.prefix}|${query.words.join(" ")}`;
    if (this.wordTerms.has(key)) return;
    this.wordTerms.set(key, query.words.length);
    this.words += query.words.length;
    if (this.words > MAX_WORDS) this.bad(`has more than ${MAX_WORDS} words in its search terms`);
  }
}

/**
 * An AND or OR of `children`, each distinct child once: `x OR x` is `x`, and a term repeated 64
 * times costs what it costs once.
 */
function combine(kind: "and" | "or", children: QueryNode[]): QueryNode {
  const distinct = new Map<string, QueryNode>();
  for (const child of children) distinct.set(JSON.stringify(child), child);
  const list = [...distinct.values()];
  return list.length === 1 ? (list[0] as QueryNode) : { kind, children: list };
}

function checkWords(value: string, at: number, bad: Refuse): WordQuery {
  const query = wordQuery(value);
  if (query.kind !== "words") return query;
  if (query.words.length > MAX_PHRASE_WORDS) {
    bad(`has a phrase of more than ${MAX_PHRASE_WORDS} words at position ${at + 1}`);
  }
  const last = query.words.at(-1) as string;
  if (query.prefix && [...last].length < MIN_PREFIX_LENGTH) {
    bad(
      `has the prefix '${last}*' at position ${at + 1}; a prefix needs at least ${MIN_PREFIX_LENGTH} characters`,
    );
  }
  return query;
}

function describe(token: Token): string {
  if (token.t === "field") return `${token.name}:`;
  if (token.t === "value") return token.value;
  return token.t;
}
