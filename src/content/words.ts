/**
 * Word matching for search, identical on SQLite and PostgreSQL because neither engine's own
 * tokenizer is used: text is split into words here, and each engine's full-text index receives
 * words it keeps as they are (FTS5's `ascii` tokenizer splits only at ASCII punctuation and
 * spaces, which words never contain; PostgreSQL receives a `tsvector` literal with explicit
 * positions, and `tsquery` literals of quoted lexemes, which no parser touches).
 *
 * A word is a run of letters and digits (Unicode), lower-cased, with accents removed (`Café` is
 * `cafe`). Everything else separates words: `Done_report` is `done` `report`, `100%` is `100`.
 */

/** Longest word kept; longer runs (encoded blobs) are cut, the same way on both sides. */
const MAX_WORD_LENGTH = 100;
/**
 * PostgreSQL keeps positions up to 16383 and at most 256 positions of one word in a `tsvector`;
 * past either, a word is not indexed (here) so that both engines find the same rows.
 */
export const MAX_POSITION = 16_383;
export const MAX_OCCURRENCES = 256;

/** FTS5 gets this at a position that holds no word (a gap between tags, a word past a limit). */
const FILLER = "\u00b7";

export function words(text: string): string[] {
  const folded = text.toLowerCase().normalize("NFKD").replace(/\p{M}/gu, "");
  const out: string[] = [];
  for (const match of folded.matchAll(/[\p{L}\p{N}]+/gu)) {
    const word = match[0];
    out.push(word.length > MAX_WORD_LENGTH ? [...word].slice(0, MAX_WORD_LENGTH).join("") : word);
  }
  return out;
}

/**
 * A field's words by position (1-based index into the array), null where no word is indexed.
 * Several values (an item's tags) are laid out one after another with a gap between them, so
 * that a phrase never runs from one tag into the next.
 */
export type FieldWords = (string | null)[];

export function fieldWords(values: readonly string[]): FieldWords {
  const out: FieldWords = [];
  const seen = new Map<string, number>();
  values.forEach((value, i) => {
    if (i > 0) out.push(null);
    for (const word of words(value)) {
      if (out.length >= MAX_POSITION) return;
      const n = (seen.get(word) ?? 0) + 1;
      seen.set(word, n);
      out.push(n > MAX_OCCURRENCES ? null : word);
    }
  });
  return out.slice(0, MAX_POSITION);
}

/** The text an FTS5 column with the `ascii` tokenizer reads as exactly these positions. */
export function ftsText(field: FieldWords): string {
  return field.map((w) => w ?? FILLER).join(" ");
}

/** A `tsvector` literal with these positions (words hold no quote or backslash to escape). */
export function tsvectorLiteral(field: FieldWords): string {
  const positions = new Map<string, number[]>();
  field.forEach((word, i) => {
    if (word === null) return;
    const list = positions.get(word);
    if (list) list.push(i + 1);
    else positions.set(word, [i + 1]);
  });
  return [...positions].map(([word, at]) => `'${word}':${at.join(",")}`).join(" ");
}

/**
 * What one search term (a bare word, `title:` value or quoted phrase) asks for: its words in
 * order, the last one a prefix when the term ends with `*`. `everything` for a term of stars
 * alone; `nothing` for a term with no word in it (`%`), which no row can contain.
 */
export type WordQuery =
  | { kind: "words"; words: string[]; prefix: boolean }
  | { kind: "everything" }
  | { kind: "nothing" };

export function wordQuery(value: string): WordQuery {
  const list = words(value);
  const prefix = /\*\s*$/.test(value);
  if (list.length === 0)
    return /^[\s*]*$/.test(value) && prefix ? { kind: "everything" } : { kind: "nothing" };
  return { kind: "words", words: list, prefix };
}

/** An FTS5 query for these words as a phrase in `columns` (all columns when omitted). */
export function ftsQuery(query: { words: string[]; prefix: boolean }, column?: string): string {
  const phrase = `"${query.words.join(" ")}"${query.prefix ? "*" : ""}`;
  return column ? `${column} : ${phrase}` : phrase;
}

/** A `tsquery` literal for these words as a phrase. */
export function tsqueryLiteral(query: { words: string[]; prefix: boolean }): string {
  const last = query.words.length - 1;
  return query.words.map((w, i) => `'${w}'${query.prefix && i === last ? ":*" : ""}`).join(" <-> ");
}
