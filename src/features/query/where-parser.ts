/**
 * The parser of a layer query's `where`: the SQL-92 subset that ArcGIS documents for standardized
 * queries ("Supported SQL functions", ArcGIS Online and ArcGIS Server), read into an AST that
 * `where-compiler.ts` turns into SQL with bound parameters. Nothing here produces SQL text.
 *
 * A hostile `where` costs bounded work: its length, the nesting of the tree and the number of
 * nodes are capped (`WHERE_LIMITS`), the parser recurses only as deep as the nesting cap allows,
 * and AND/OR chains are n-ary so that a long `a=1 OR a=2 OR …` is wide, not deep.
 */

export const WHERE_LIMITS = {
  /** Characters. ArcGIS documents no limit; 64 KiB holds any client's long IN list. */
  maxLength: 65_536,
  /** Levels of the tree (parentheses, NOT, operators, function arguments). */
  maxDepth: 64,
  /** Nodes of the tree: every literal, field, operator and call. */
  maxNodes: 20_000,
} as const;

export type WhereSyntaxError =
  | { kind: "tooLong"; length: number; max: number }
  | { kind: "tooDeep"; max: number; position: number }
  | { kind: "tooComplex"; max: number; position: number }
  | { kind: "syntax"; message: string; position: number }
  | { kind: "unknownFunction"; name: string; position: number };

export type ExtractField = "YEAR" | "MONTH" | "DAY" | "HOUR" | "MINUTE" | "SECOND";
/** The aggregate functions a `havingClause` takes (ArcGIS lists these, as the statistic types). */
export type AggregateFunction = "COUNT" | "SUM" | "MIN" | "MAX" | "AVG" | "STDDEV" | "VAR";
const AGGREGATE_FUNCTIONS = new Set<string>(["COUNT", "SUM", "MIN", "MAX", "AVG", "STDDEV", "VAR"]);
export type CastTarget = "INTEGER" | "FLOAT" | "VARCHAR";

type Node<T> = T & { position: number; depth: number };

export type Expr = Node<
  | { type: "number"; value: number; integer: boolean }
  | { type: "string"; value: string }
  | { type: "null" }
  /** DATE 'yyyy-mm-dd' and TIMESTAMP 'yyyy-mm-dd hh:mm:ss', read as UTC, in epoch milliseconds. */
  | { type: "dateLiteral"; value: number }
  | { type: "current"; which: "date" | "timestamp" }
  | { type: "field"; name: string }
  | { type: "negate"; operand: Expr }
  | { type: "arithmetic"; op: "+" | "-" | "*" | "/"; left: Expr; right: Expr }
  | { type: "compare"; op: "=" | "<>" | "<" | "<=" | ">" | ">="; left: Expr; right: Expr }
  | { type: "and" | "or"; operands: Expr[] }
  | { type: "not"; operand: Expr }
  | { type: "in"; operand: Expr; list: Expr[]; negated: boolean }
  | { type: "between"; operand: Expr; low: Expr; high: Expr; negated: boolean }
  | { type: "like"; operand: Expr; pattern: string; escape: string | undefined; negated: boolean }
  | { type: "isNull"; operand: Expr; negated: boolean }
  | { type: "call"; name: "UPPER" | "LOWER" | "CHAR_LENGTH"; argument: Expr }
  | { type: "substring"; operand: Expr; start: number; length: number | undefined }
  | { type: "trim"; side: "BOTH" | "LEADING" | "TRAILING"; characters: Expr | undefined; operand: Expr }
  | { type: "cast"; operand: Expr; target: CastTarget; length: number | undefined }
  | { type: "extract"; field: ExtractField; operand: Expr }
  /** Only in a `havingClause`: an aggregate of one field, or of every row (`COUNT(*)`, field undefined). */
  | { type: "aggregate"; fn: AggregateFunction; field: string | undefined }
>;

/** A node before its depth is known: Omit distributed over the union. */
type ExprFields = Expr extends infer E ? (E extends Expr ? Omit<E, "depth"> : never) : never;

type Token =
  | { kind: "number"; text: string; position: number }
  | { kind: "string"; value: string; position: number }
  | { kind: "word"; text: string; upper: string; position: number }
  | { kind: "quoted"; text: string; position: number }
  | { kind: "symbol"; text: string; position: number }
  | { kind: "end"; position: number };

class Failure {
  constructor(readonly error: WhereSyntaxError) {}
}

const syntax = (message: string, position: number): Failure =>
  new Failure({ kind: "syntax", message, position });

const SYMBOLS = ["<>", "!=", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ","];

function tokenize(source: string): Token[] {
  // PostgreSQL refuses a NUL in text outright, where SQLite would compare it: refused for both.
  const nul = source.indexOf("\u0000");
  if (nul >= 0) throw syntax("NUL characters are not allowed", nul);
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const start = i;
    const two = source.slice(i, i + 2);
    // Comments, statement separators and concatenation are not in the subset. They are refused
    // by name rather than read some other way (`--1` as two minus signs), so that nobody relies
    // on a reading a database would not share.
    if (two === "--" || two === "/*") throw syntax("comments are not allowed", i);
    if (two === "||") throw syntax("the || operator is not supported", i);
    if (c === ";") throw syntax("';' is not allowed", i);
    if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(source[i + 1] ?? ""))) {
      const match = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?/.exec(
        source.slice(i),
      ) as RegExpExecArray;
      i += match[0].length;
      if (/[A-Za-z_]/.test(source[i] ?? "")) throw syntax("a number runs into a name", start);
      tokens.push({ kind: "number", text: match[0], position: start });
      continue;
    }
    if (c === "'" || c === '"') {
      let value = "";
      i++;
      for (;;) {
        if (i >= source.length)
          throw syntax(c === "'" ? "unterminated string" : "unterminated quoted name", start);
        if (source[i] === c) {
          if (source[i + 1] === c) {
            value += c;
            i += 2;
            continue;
          }
          i++;
          break;
        }
        value += source[i];
        i++;
      }
      if (c === "'") tokens.push({ kind: "string", value, position: start });
      else {
        if (value === "") throw syntax("empty quoted name", start);
        tokens.push({ kind: "quoted", text: value, position: start });
      }
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      const match = /^[A-Za-z_][A-Za-z0-9_]*/.exec(source.slice(i)) as RegExpExecArray;
      i += match[0].length;
      tokens.push({ kind: "word", text: match[0], upper: match[0].toUpperCase(), position: start });
      continue;
    }
    const symbol = SYMBOLS.find((s) => source.startsWith(s, i));
    if (!symbol) throw syntax(`unexpected character '${c}'`, i);
    i += symbol.length;
    tokens.push({ kind: "symbol", text: symbol, position: start });
  }
  tokens.push({ kind: "end", position: source.length });
  return tokens;
}

/** Words that begin or continue a construct; a field with such a name must be double-quoted. */
const RESERVED = new Set([
  "AND",
  "OR",
  "NOT",
  "IN",
  "BETWEEN",
  "LIKE",
  "ESCAPE",
  "IS",
  "NULL",
  "CAST",
  "AS",
  "EXTRACT",
  "FROM",
  "FOR",
  "SUBSTRING",
  "TRIM",
  "BOTH",
  "LEADING",
  "TRAILING",
  "CURRENT_DATE",
  "CURRENT_TIMESTAMP",
  "UPPER",
  "LOWER",
  "CHAR_LENGTH",
  "SELECT",
  "UNION",
]);

const EXTRACT_FIELDS = new Set<string>(["YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"]);

function parseDateLiteral(kind: "DATE" | "TIMESTAMP", text: string, position: number): number {
  const pattern =
    kind === "DATE"
      ? /^(\d{4})-(\d{2})-(\d{2})$/
      : /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$/;
  const m = pattern.exec(text);
  const expected = kind === "DATE" ? "'yyyy-mm-dd'" : "'yyyy-mm-dd hh:mm:ss'";
  if (!m) throw syntax(`${kind} expects ${expected}`, position);
  const [y, mo, d, h = "0", mi = "0", s = "0", ms = "0"] = m.slice(1).map((v) => v ?? "0");
  const parts = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number];
  const millis = Number(ms.padEnd(3, "0"));
  const value = Date.UTC(parts[0], parts[1] - 1, parts[2], parts[3], parts[4], parts[5], millis);
  const back = new Date(value);
  // Date.UTC rolls 2021-02-30 over into March; a date that does not come back unchanged is not one.
  if (
    back.getUTCFullYear() !== parts[0] ||
    back.getUTCMonth() !== parts[1] - 1 ||
    back.getUTCDate() !== parts[2] ||
    back.getUTCHours() !== parts[3] ||
    back.getUTCMinutes() !== parts[4] ||
    back.getUTCSeconds() !== parts[5]
  ) {
    throw syntax(`${kind} '${text}' is not a valid ${kind.toLowerCase()}`, position);
  }
  return value;
}

class Parser {
  private index = 0;
  private nodes = 0;
  private recursion = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly aggregates: boolean,
  ) {}

  parse(): Expr {
    const expr = this.orExpr();
    const next = this.peek();
    if (next.kind !== "end") throw syntax(`unexpected ${this.describe(next)}`, next.position);
    return expr;
  }

  /** The parameter the text came in, for messages: a havingClause is the one that takes aggregates. */
  private get clause(): string {
    return this.aggregates ? "havingClause" : "where";
  }

  private describe(token: Token): string {
    return describe(token, this.clause);
  }

  private peek(offset = 0): Token {
    return this.tokens[Math.min(this.index + offset, this.tokens.length - 1)] as Token;
  }

  private next(): Token {
    const token = this.peek();
    if (token.kind !== "end") this.index++;
    return token;
  }

  private isWord(word: string, offset = 0): boolean {
    const token = this.peek(offset);
    return token.kind === "word" && token.upper === word;
  }

  private isSymbol(symbol: string, offset = 0): boolean {
    const token = this.peek(offset);
    return token.kind === "symbol" && token.text === symbol;
  }

  private acceptWord(word: string): boolean {
    if (!this.isWord(word)) return false;
    this.index++;
    return true;
  }

  private expectWord(word: string): void {
    if (!this.acceptWord(word)) {
      const token = this.peek();
      throw syntax(`expected ${word}, found ${this.describe(token)}`, token.position);
    }
  }

  private expectSymbol(symbol: string): void {
    if (!this.isSymbol(symbol)) {
      const token = this.peek();
      throw syntax(`expected '${symbol}', found ${this.describe(token)}`, token.position);
    }
    this.index++;
  }

  /** Every node is made here: this is where the depth and node caps hold. */
  private node(fields: ExprFields, children: Expr[]): Expr {
    this.nodes++;
    if (this.nodes > WHERE_LIMITS.maxNodes) {
      throw new Failure({ kind: "tooComplex", max: WHERE_LIMITS.maxNodes, position: fields.position });
    }
    let depth = 1;
    for (const child of children) depth = Math.max(depth, child.depth + 1);
    if (depth > WHERE_LIMITS.maxDepth) {
      throw new Failure({ kind: "tooDeep", max: WHERE_LIMITS.maxDepth, position: fields.position });
    }
    return { ...fields, depth } as Expr;
  }

  /** Guards the recursion of the descent itself, which parentheses deepen without adding nodes. */
  private nested<T>(position: number, inner: () => T): T {
    this.recursion++;
    if (this.recursion > WHERE_LIMITS.maxDepth) {
      throw new Failure({ kind: "tooDeep", max: WHERE_LIMITS.maxDepth, position });
    }
    try {
      return inner();
    } finally {
      this.recursion--;
    }
  }

  private orExpr(): Expr {
    const position = this.peek().position;
    const operands = [this.andExpr()];
    while (this.acceptWord("OR")) operands.push(this.andExpr());
    return operands.length === 1
      ? (operands[0] as Expr)
      : this.node({ type: "or", operands, position }, operands);
  }

  private andExpr(): Expr {
    const position = this.peek().position;
    const operands = [this.notExpr()];
    while (this.acceptWord("AND")) operands.push(this.notExpr());
    return operands.length === 1
      ? (operands[0] as Expr)
      : this.node({ type: "and", operands, position }, operands);
  }

  private notExpr(): Expr {
    const position = this.peek().position;
    if (this.acceptWord("NOT")) {
      const operand = this.nested(position, () => this.notExpr());
      return this.node({ type: "not", operand, position }, [operand]);
    }
    return this.predicate();
  }

  private predicate(): Expr {
    const left = this.additive();
    const token = this.peek();
    if (token.kind === "symbol" && ["=", "<>", "!=", "<", "<=", ">", ">="].includes(token.text)) {
      this.index++;
      const right = this.additive();
      const op = (token.text === "!=" ? "<>" : token.text) as "=" | "<>" | "<" | "<=" | ">" | ">=";
      return this.node({ type: "compare", op, left, right, position: token.position }, [left, right]);
    }
    if (this.isWord("IS")) {
      this.index++;
      const negated = this.acceptWord("NOT");
      this.expectWord("NULL");
      return this.node({ type: "isNull", operand: left, negated, position: token.position }, [left]);
    }
    const negated =
      this.isWord("NOT") && (this.isWord("IN", 1) || this.isWord("BETWEEN", 1) || this.isWord("LIKE", 1));
    if (negated) this.index++;
    if (this.acceptWord("IN")) {
      this.expectSymbol("(");
      const list = [this.additive()];
      while (this.isSymbol(",")) {
        this.index++;
        list.push(this.additive());
      }
      this.expectSymbol(")");
      return this.node({ type: "in", operand: left, list, negated, position: token.position }, [
        left,
        ...list,
      ]);
    }
    if (this.acceptWord("BETWEEN")) {
      const low = this.additive();
      this.expectWord("AND");
      const high = this.additive();
      return this.node({ type: "between", operand: left, low, high, negated, position: token.position }, [
        left,
        low,
        high,
      ]);
    }
    if (this.acceptWord("LIKE")) {
      const patternToken = this.next();
      if (patternToken.kind !== "string") {
        throw syntax("LIKE expects a quoted pattern", patternToken.position);
      }
      let escapeChar: string | undefined;
      if (this.acceptWord("ESCAPE")) {
        const escapeToken = this.next();
        if (escapeToken.kind !== "string" || [...escapeToken.value].length !== 1) {
          throw syntax("ESCAPE expects one quoted character", escapeToken.position);
        }
        escapeChar = escapeToken.value;
      }
      checkLikePattern(patternToken.value, escapeChar, patternToken.position);
      return this.node(
        {
          type: "like",
          operand: left,
          pattern: patternToken.value,
          escape: escapeChar,
          negated,
          position: token.position,
        },
        [left],
      );
    }
    return left;
  }

  private additive(): Expr {
    let left = this.multiplicative();
    for (;;) {
      const token = this.peek();
      if (token.kind !== "symbol" || (token.text !== "+" && token.text !== "-")) return left;
      this.index++;
      const right = this.multiplicative();
      left = this.node({ type: "arithmetic", op: token.text, left, right, position: token.position }, [
        left,
        right,
      ]);
    }
  }

  private multiplicative(): Expr {
    let left = this.unary();
    for (;;) {
      const token = this.peek();
      if (token.kind !== "symbol" || (token.text !== "*" && token.text !== "/")) return left;
      this.index++;
      const right = this.unary();
      left = this.node({ type: "arithmetic", op: token.text, left, right, position: token.position }, [
        left,
        right,
      ]);
    }
  }

  private unary(): Expr {
    const token = this.peek();
    if (token.kind === "symbol" && (token.text === "-" || token.text === "+")) {
      this.index++;
      const operand = this.nested(token.position, () => this.unary());
      if (token.text === "+") return operand;
      // A negative number literal stays a literal: `-5` is bound as -5, not computed.
      if (operand.type === "number") return { ...operand, value: -operand.value, position: token.position };
      return this.node({ type: "negate", operand, position: token.position }, [operand]);
    }
    return this.primary();
  }

  private primary(): Expr {
    const token = this.next();
    const position = token.position;
    switch (token.kind) {
      case "number": {
        const value = Number(token.text);
        if (!Number.isFinite(value)) throw syntax(`number out of range: ${token.text}`, position);
        const integer = /^[0-9]+$/.test(token.text) && Number.isSafeInteger(value);
        return this.node({ type: "number", value, integer, position }, []);
      }
      case "string":
        return this.node({ type: "string", value: token.value, position }, []);
      case "quoted":
        return this.node({ type: "field", name: token.text, position }, []);
      case "symbol":
        if (token.text === "(") {
          const inner = this.nested(position, () => this.orExpr());
          this.expectSymbol(")");
          return inner;
        }
        throw syntax(`unexpected '${token.text}'`, position);
      case "end":
        throw syntax(`unexpected end of ${this.clause}`, position);
      case "word":
        return this.word(token);
    }
  }

  private word(token: Extract<Token, { kind: "word" }>): Expr {
    const position = token.position;
    const upper = token.upper;
    if (upper === "NULL") return this.node({ type: "null", position }, []);
    if ((upper === "DATE" || upper === "TIMESTAMP") && this.peek().kind === "string") {
      const literal = this.next() as Extract<Token, { kind: "string" }>;
      const value = parseDateLiteral(upper, literal.value, literal.position);
      return this.node({ type: "dateLiteral", value, position }, []);
    }
    if (upper === "CURRENT_DATE" || upper === "CURRENT_TIMESTAMP") {
      // ArcGIS Online writes them with empty parentheses, ArcGIS Server without: both are read.
      if (this.isSymbol("(") && this.isSymbol(")", 1)) this.index += 2;
      return this.node(
        { type: "current", which: upper === "CURRENT_DATE" ? "date" : "timestamp", position },
        [],
      );
    }
    if (!this.isSymbol("(")) {
      if (RESERVED.has(upper)) throw syntax(`unexpected ${upper}`, position);
      return this.node({ type: "field", name: token.text, position }, []);
    }
    this.index++;
    return this.nested(position, () => {
      const result = this.call(upper, token.text, position);
      this.expectSymbol(")");
      return result;
    });
  }

  /** The argument list of a function, after its '(' and before its ')'. */
  private call(upper: string, name: string, position: number): Expr {
    switch (upper) {
      case "UPPER":
      case "LOWER":
      case "CHAR_LENGTH": {
        const argument = this.additive();
        return this.node({ type: "call", name: upper, argument, position }, [argument]);
      }
      case "SUBSTRING": {
        const operand = this.additive();
        this.expectWord("FROM");
        const start = this.integerLiteral("SUBSTRING FROM");
        let length: number | undefined;
        if (this.acceptWord("FOR")) {
          length = this.integerLiteral("SUBSTRING FOR");
          if (length < 0) throw syntax("SUBSTRING FOR must not be negative", this.peek(-1).position);
        }
        return this.node({ type: "substring", operand, start, length, position }, [operand]);
      }
      case "TRIM": {
        let side: "BOTH" | "LEADING" | "TRAILING" = "BOTH";
        let explicitSide = false;
        for (const candidate of ["BOTH", "LEADING", "TRAILING"] as const) {
          if (this.acceptWord(candidate)) {
            side = candidate;
            explicitSide = true;
            break;
          }
        }
        let characters: Expr | undefined;
        let operand: Expr;
        if (explicitSide && this.acceptWord("FROM")) {
          operand = this.additive();
        } else {
          const first = this.additive();
          if (this.acceptWord("FROM")) {
            characters = first;
            operand = this.additive();
          } else if (explicitSide) {
            throw syntax("expected FROM in TRIM", this.peek().position);
          } else {
            operand = first;
          }
        }
        const children = characters ? [characters, operand] : [operand];
        return this.node({ type: "trim", side, characters, operand, position }, children);
      }
      case "CAST": {
        const operand = this.additive();
        this.expectWord("AS");
        const { target, length } = this.castTarget();
        return this.node({ type: "cast", operand, target, length, position }, [operand]);
      }
      case "EXTRACT": {
        const fieldToken = this.next();
        if (fieldToken.kind !== "word" || !EXTRACT_FIELDS.has(fieldToken.upper)) {
          throw syntax("EXTRACT expects YEAR, MONTH, DAY, HOUR, MINUTE or SECOND", fieldToken.position);
        }
        this.expectWord("FROM");
        const operand = this.additive();
        return this.node({ type: "extract", field: fieldToken.upper as ExtractField, operand, position }, [
          operand,
        ]);
      }
      default:
        if (AGGREGATE_FUNCTIONS.has(upper)) return this.aggregate(upper as AggregateFunction, position);
        throw new Failure({ kind: "unknownFunction", name, position });
    }
  }

  /**
   * An aggregate's argument: one field, or `*` for COUNT. Expressions are not taken: ArcGIS
   * aggregates fields, and a field alone keeps the statement to columns the layer has.
   */
  private aggregate(fn: AggregateFunction, position: number): Expr {
    if (!this.aggregates) {
      throw syntax(`${fn} is an aggregate function, which only havingClause takes`, position);
    }
    const token = this.next();
    if (fn === "COUNT" && token.kind === "symbol" && token.text === "*") {
      return this.node({ type: "aggregate", fn, field: undefined, position }, []);
    }
    if (token.kind === "quoted" || (token.kind === "word" && !RESERVED.has(token.upper))) {
      return this.node({ type: "aggregate", fn, field: token.text, position }, []);
    }
    throw syntax(`${fn} expects a field name${fn === "COUNT" ? " or *" : ""}`, token.position);
  }

  private integerLiteral(what: string): number {
    const negative = this.isSymbol("-");
    if (negative) this.index++;
    const token = this.next();
    if (token.kind !== "number" || !/^[0-9]+$/.test(token.text) || Number(token.text) > 2_147_483_647) {
      throw syntax(`${what} expects an integer`, token.position);
    }
    return negative ? -Number(token.text) : Number(token.text);
  }

  private castTarget(): { target: CastTarget; length: number | undefined } {
    const token = this.next();
    const word = token.kind === "word" ? token.upper : "";
    let target: CastTarget;
    if (["INTEGER", "INT", "SMALLINT", "BIGINT"].includes(word)) target = "INTEGER";
    else if (["FLOAT", "REAL"].includes(word)) target = "FLOAT";
    else if (word === "DOUBLE") {
      this.acceptWord("PRECISION");
      target = "FLOAT";
    } else if (word === "VARCHAR" || word === "CHARACTER") {
      if (word === "CHARACTER") this.expectWord("VARYING");
      target = "VARCHAR";
    } else {
      throw syntax(
        "CAST supports INTEGER, SMALLINT, BIGINT, FLOAT, REAL, DOUBLE PRECISION and VARCHAR",
        token.position,
      );
    }
    let length: number | undefined;
    if (target === "VARCHAR" && this.isSymbol("(")) {
      this.index++;
      length = this.integerLiteral("VARCHAR length");
      if (length < 1) throw syntax("VARCHAR length must be positive", this.peek(-1).position);
      this.expectSymbol(")");
    }
    return { target, length };
  }
}

/**
 * The escape character may only escape `%`, `_` or itself, and not end the pattern: PostgreSQL
 * refuses a trailing escape and the engines differ on escaping an ordinary character.
 */
function checkLikePattern(pattern: string, escapeChar: string | undefined, position: number): void {
  if (escapeChar === undefined) return;
  const chars = [...pattern];
  for (let i = 0; i < chars.length; i++) {
    if (chars[i] !== escapeChar) continue;
    const following = chars[i + 1];
    if (following !== "%" && following !== "_" && following !== escapeChar) {
      throw syntax("in a LIKE pattern the escape character must precede %, _ or itself", position);
    }
    i++;
  }
}

function describe(token: Token, clause: string): string {
  switch (token.kind) {
    case "end":
      return `end of ${clause}`;
    case "string":
      return "a string";
    case "number":
      return `number ${token.text}`;
    case "word":
      return `'${token.text}'`;
    case "quoted":
      return `"${token.text}"`;
    case "symbol":
      return `'${token.text}'`;
  }
}

/** With `aggregates`, for a `havingClause`: COUNT, SUM, MIN, MAX, AVG, STDDEV and VAR of a field. */
export function parseWhere(
  source: string,
  options: { aggregates?: boolean } = {},
): { ok: true; value: Expr } | { ok: false; error: WhereSyntaxError } {
  if (source.length > WHERE_LIMITS.maxLength) {
    return { ok: false, error: { kind: "tooLong", length: source.length, max: WHERE_LIMITS.maxLength } };
  }
  try {
    return { ok: true, value: new Parser(tokenize(source), options.aggregates === true).parse() };
  } catch (error) {
    if (error instanceof Failure) return { ok: false, error: error.error };
    throw error;
  }
}
