import fs from "node:fs/promises";
import { Readable } from "node:stream";
import { later, type Queryable } from "../db/database.js";
import { newId } from "../ids.js";

/**
 * Item files (an item's data, its thumbnail), stored in the database in chunks: every node of a
 * deployment shares the database, not a file system. Files are written and read a chunk at a
 * time, so neither an upload of 100 MB nor eight concurrent downloads of it hold more than a few
 * chunks in memory. Each version of a file has its own id; its chunks go with its row (migration
 * 0007).
 *
 * Feature attachments are stored the same way in a table of chunks of their own (migration 0011):
 * `writeChunks` and `streamChunks` serve both, the rest of this file is about item files.
 */

/** Bytes per chunk: large enough that a file is few rows, small enough to hold a few at once. */
export const FILE_CHUNK_BYTES = 1024 * 1024;

/**
 * An item's data, its thumbnail, a file of its info folder (`info/<folder>/<name>`, `updateinfo`),
 * one of its resources (`resources/<path>`, `addResources`), or, while its data is uploaded in
 * parts (`addItem` with `multipart=true`), the mark of that upload (`upload`: no bytes, the name
 * the data will have) and its parts (`parts/<00001..10000>`, `addPart`).
 */
export type FileKind =
  | "data"
  | "thumbnail"
  | `info/${string}`
  | `resources/${string}`
  | "upload"
  | `parts/${string}`;

/**
 * Where the bytes of a file to store come from: memory (`text`, a replicated copy) or a file on
 * disk (an upload the request parser spooled), which is read a chunk at a time.
 */
export type FileSource = { data: Buffer } | { path: string };

/**
 * What `writeFile` stores: a source, or chunks already cut to `FILE_CHUNK_BYTES` (the last one
 * shorter), as `concatenated` makes them from stored files.
 */
export type StoreSource = FileSource | { chunks: AsyncIterable<Buffer> };

/** A stored file's row: what it is, without its bytes. */
export interface StoredFile {
  itemId: string;
  kind: FileKind;
  name: string;
  contentType: string;
  fileId: string;
  size: number;
  /** When a resource was added (null for other kinds). */
  created?: number | null;
  /** A resource's access, `inherit` or `private` (null for other kinds). */
  access?: string | null;
}

/** The first `n` bytes of a source (fewer when it is shorter), without reading the rest. */
export async function headOf(source: FileSource, n: number): Promise<Buffer> {
  if ("data" in source) return source.data.subarray(0, n);
  const handle = await fs.open(source.path, "r");
  try {
    const head = Buffer.alloc(n);
    const { bytesRead } = await handle.read(head, 0, n, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * The tables of chunks: `(file_id, seq, data)`, each row hanging from its file's row by `file_id`
 * (deleting the file's row deletes its chunks).
 */
export type ChunkTable = "item_file_chunks" | "feature_attachment_chunks";

/** Where the bytes of one version of a stored file are, and how many there are. */
export interface ChunkedFile {
  table: ChunkTable;
  fileId: string;
  size: number;
}

/** The chunks of a source in order; a file on disk is read one chunk at a time. */
async function* chunksOf(source: StoreSource): AsyncGenerator<Buffer> {
  if ("chunks" in source) {
    yield* source.chunks;
    return;
  }
  if ("data" in source) {
    for (let at = 0; at < source.data.length; at += FILE_CHUNK_BYTES) {
      yield source.data.subarray(at, at + FILE_CHUNK_BYTES);
    }
    return;
  }
  const handle = await fs.open(source.path, "r");
  try {
    for (;;) {
      // A fresh buffer per chunk: the driver may still hold the last one while it is sent.
      const chunk = Buffer.allocUnsafe(FILE_CHUNK_BYTES);
      let filled = 0;
      while (filled < FILE_CHUNK_BYTES) {
        const { bytesRead } = await handle.read(chunk, filled, FILE_CHUNK_BYTES - filled, null);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled === 0) return;
      yield chunk.subarray(0, filled);
      if (filled < FILE_CHUNK_BYTES) return;
    }
  } finally {
    await handle.close();
  }
}

/**
 * Stores a file of an item in `trx`, replacing the one of that kind; its size is what was
 * actually written. Run it in the transaction that changes the item, so that the file and the
 * change commit together.
 */
export async function writeFile(
  trx: Queryable,
  itemId: string,
  kind: FileKind,
  meta: { name: string; contentType: string; created?: number; access?: string },
  source: StoreSource,
): Promise<StoredFile> {
  const fileId = await insertFileRow(trx, itemId, kind, meta, 0);
  const size = await writeChunks(trx, "item_file_chunks", fileId, source);
  await trx.updateTable("item_files").set({ size }).where("file_id", "=", fileId).execute();
  return { itemId, kind, name: meta.name, contentType: meta.contentType, fileId, size };
}

/** Replaces an item's file of one kind by a new row of `size` bytes and no chunks yet; its id. */
async function insertFileRow(
  trx: Queryable,
  itemId: string,
  kind: FileKind,
  meta: { name: string; contentType: string; created?: number; access?: string },
  size: number,
): Promise<string> {
  await deleteFile(trx, itemId, kind);
  const fileId = newId();
  await trx
    .insertInto("item_files")
    .values({
      item_id: itemId,
      kind,
      name: meta.name,
      content_type: meta.contentType,
      file_id: fileId,
      size,
      created: meta.created ?? null,
      access: meta.access ?? null,
    })
    .execute();
  return fileId;
}

/**
 * Stores the bytes of stored files of the item one after the other as its file of `kind` (the
 * data a multipart upload's parts make), in `trx`. When every file but the last is a whole number
 * of chunks, their chunks together are already cut as readers expect (each full but the very
 * last): they are moved to the new file, their rows re-pointed (file id and sequence number), and
 * no byte passes through here. Otherwise they are read and written again a chunk at a time
 * (`concatenated`). Either way the files given are left for the caller to delete, in `trx`.
 */
export async function writeJoined(
  trx: Queryable,
  itemId: string,
  kind: FileKind,
  meta: { name: string; contentType: string },
  files: readonly StoredFile[],
): Promise<StoredFile> {
  const aligned = files.slice(0, -1).every((file) => file.size % FILE_CHUNK_BYTES === 0);
  if (!aligned) return writeFile(trx, itemId, kind, meta, { chunks: concatenated(trx, files) });
  const size = files.reduce((sum, file) => sum + file.size, 0);
  const fileId = await insertFileRow(trx, itemId, kind, meta, size);
  let offset = 0;
  for (const file of files) {
    const moved = offset;
    await trx
      .updateTable("item_file_chunks")
      .set((eb) => ({ file_id: fileId, seq: eb("seq", "+", moved) }))
      .where("file_id", "=", file.fileId)
      .execute();
    offset += chunkCount(file.size);
  }
  return { itemId, kind, name: meta.name, contentType: meta.contentType, fileId, size };
}

/**
 * Writes the chunks of a file whose row (holding `fileId`) is already in `trx`; answers the bytes
 * written.
 */
export async function writeChunks(
  trx: Queryable,
  table: ChunkTable,
  fileId: string,
  source: StoreSource,
): Promise<number> {
  let seq = 0;
  let size = 0;
  for await (const data of chunksOf(source)) {
    await trx.insertInto(table).values({ file_id: fileId, seq, data }).execute();
    seq += 1;
    size += data.length;
  }
  return size;
}

/** A file to store with `writeNewFiles`: its item, kind, name and type, and its bytes. */
export interface NewFile {
  itemId: string;
  kind: FileKind;
  name: string;
  contentType: string;
  data: Buffer;
}

/** Bytes of chunks `writeNewFiles` sends in one statement, at most (a single larger chunk aside). */
const CHUNK_STATEMENT_BYTES = 8 * FILE_CHUNK_BYTES;

/**
 * Stores files of items that have none of their kind yet (new items, or items whose files
 * `deleteFilesOf` just removed), as `writeFile` stores each, in `trx`: one statement for their
 * rows and one per few MB of their chunks, rather than a few per file.
 */
export async function writeNewFiles(trx: Queryable, files: readonly NewFile[]): Promise<void> {
  if (files.length === 0) return;
  const ids = files.map(() => newId());
  await trx
    .insertInto("item_files")
    .values(
      files.map((f, i) => ({
        item_id: f.itemId,
        kind: f.kind,
        name: f.name,
        content_type: f.contentType,
        file_id: ids[i] as string,
        size: f.data.length,
        created: null,
        access: null,
      })),
    )
    .execute();
  let rows: { file_id: string; seq: number; data: Buffer }[] = [];
  let bytes = 0;
  const flush = async () => {
    if (rows.length > 0) await trx.insertInto("item_file_chunks").values(rows).execute();
    rows = [];
    bytes = 0;
  };
  for (const [i, f] of files.entries()) {
    let seq = 0;
    for await (const data of chunksOf({ data: f.data })) {
      if (bytes + data.length > CHUNK_STATEMENT_BYTES) await flush();
      rows.push({ file_id: ids[i] as string, seq: seq++, data });
      bytes += data.length;
    }
  }
  await flush();
}

/**
 * Deletes every file of these items, as `deleteFile` without a kind deletes one item's, in one
 * statement whose answer is not read (on PostgreSQL it travels with the next statement, `later`).
 */
export async function deleteFilesOf(trx: Queryable, itemIds: readonly string[]): Promise<void> {
  if (itemIds.length === 0) return;
  await later(
    trx,
    trx
      .deleteFrom("item_files")
      .where("item_id", "in", [...itemIds])
      .compile(),
  );
}

/** Deletes an item's file of one kind, or all its files; the chunks go with their rows. */
export async function deleteFile(trx: Queryable, itemId: string, kind?: FileKind): Promise<void> {
  let query = trx.deleteFrom("item_files").where("item_id", "=", itemId);
  if (kind) query = query.where("kind", "=", kind);
  await query.execute();
}

/** How many files of the info folder an item has (`info/...` kinds). */
export async function countInfoFiles(q: Queryable, itemId: string): Promise<number> {
  const row = await q
    .selectFrom("item_files")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("item_id", "=", itemId)
    .where("kind", "like", "info/%")
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** A resource of an item, as `listResources` answers it. */
export interface ResourceRow {
  kind: `resources/${string}`;
  size: number;
  created: number;
  access: string;
}

/** How many resources an item has. */
export async function countResources(q: Queryable, itemId: string): Promise<number> {
  const row = await q
    .selectFrom("item_files")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("item_id", "=", itemId)
    .where("kind", "like", "resources/%")
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * All resources of an item (at most `MAX_RESOURCES_PER_ITEM`, so a listing may read them all to
 * leave out the private ones before paging).
 */
export async function listResources(q: Queryable, itemId: string): Promise<ResourceRow[]> {
  const rows = await q
    .selectFrom("item_files")
    .select(["kind", "size", "created", "access"])
    .where("item_id", "=", itemId)
    .where("kind", "like", "resources/%")
    .orderBy("kind")
    .execute();
  return rows.map((r) => ({
    kind: r.kind as `resources/${string}`,
    size: Number(r.size),
    created: Number(r.created ?? 0),
    access: r.access ?? "inherit",
  }));
}

/** Changes a resource's access without touching its bytes. */
export async function setResourceAccess(
  trx: Queryable,
  itemId: string,
  kind: `resources/${string}`,
  access: string,
): Promise<void> {
  await trx
    .updateTable("item_files")
    .set({ access })
    .where("item_id", "=", itemId)
    .where("kind", "=", kind)
    .execute();
}

/** The parts of an item's upload (`parts/...` kinds), in the order of their numbers. */
export async function listParts(q: Queryable, itemId: string): Promise<StoredFile[]> {
  const rows = await q
    .selectFrom("item_files")
    .select(["kind", "name", "content_type", "file_id", "size"])
    .where("item_id", "=", itemId)
    .where("kind", "like", "parts/%")
    .execute();
  return rows
    .map((r) => ({
      itemId,
      kind: r.kind as `parts/${string}`,
      name: r.name,
      contentType: r.content_type,
      fileId: r.file_id,
      size: Number(r.size),
    }))
    .sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0));
}

/** Deletes the parts of an item's upload, and its mark. */
export async function deleteUpload(trx: Queryable, itemId: string): Promise<void> {
  await trx
    .deleteFrom("item_files")
    .where("item_id", "=", itemId)
    .where((eb) => eb.or([eb("kind", "like", "parts/%"), eb("kind", "=", "upload")]))
    .execute();
}

/**
 * The bytes of stored item files one after the other, cut again into chunks of `FILE_CHUNK_BYTES`
 * (the files' own last chunks are short): the data a multipart upload's parts make, read and
 * written a chunk at a time.
 */
export async function* concatenated(q: Queryable, files: readonly StoredFile[]): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let held = 0;
  for (const file of files) {
    for (let seq = 0; seq < chunkCount(file.size); seq++) {
      let chunk = await readChunk(q, itemChunks(file), seq);
      while (chunk.length > 0) {
        const take = Math.min(FILE_CHUNK_BYTES - held, chunk.length);
        pending.push(chunk.subarray(0, take));
        held += take;
        chunk = chunk.subarray(take);
        if (held === FILE_CHUNK_BYTES) {
          yield Buffer.concat(pending, held);
          pending = [];
          held = 0;
        }
      }
    }
  }
  if (held > 0) yield Buffer.concat(pending, held);
}

/** Deletes every resource of an item; answers how many there were. */
export async function deleteResources(trx: Queryable, itemId: string): Promise<number> {
  const result = await trx
    .deleteFrom("item_files")
    .where("item_id", "=", itemId)
    .where("kind", "like", "resources/%")
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function findFile(
  q: Queryable,
  itemId: string,
  kind: FileKind,
): Promise<StoredFile | undefined> {
  const row = await q
    .selectFrom("item_files")
    .select(["name", "content_type", "file_id", "size", "created", "access"])
    .where("item_id", "=", itemId)
    .where("kind", "=", kind)
    .executeTakeFirst();
  return row ? storedFile({ ...row, item_id: itemId, kind }) : undefined;
}

/** A row of `item_files` as the file it describes. */
function storedFile(row: {
  item_id: string;
  kind: string;
  name: string;
  content_type: string;
  file_id: string;
  size: number | string | bigint;
  created: number | string | bigint | null;
  access: StoredFile["access"];
}): StoredFile {
  return {
    itemId: row.item_id,
    kind: row.kind as FileKind,
    name: row.name,
    contentType: row.content_type,
    fileId: row.file_id,
    size: Number(row.size),
    created: row.created === null ? null : Number(row.created),
    access: row.access,
  };
}

/** A file read was overtaken by a change: the file was replaced or deleted since its row was read. */
export class FileChangedError extends Error {
  constructor(file: ChunkedFile) {
    super(`file ${file.fileId} (${file.table}) changed while it was read`);
    this.name = "FileChangedError";
  }
}

/** Where the chunks of a stored item file are. */
const itemChunks = (file: StoredFile): ChunkedFile => ({
  table: "item_file_chunks",
  fileId: file.fileId,
  size: file.size,
});

/** Chunks a file of `size` bytes has. */
const chunkCount = (size: number) => Math.ceil(size / FILE_CHUNK_BYTES);

/**
 * One chunk of a file, checked against the row: a missing or short chunk means the file was
 * replaced or deleted since its row was read, and nothing of another version may follow.
 */
async function readChunk(q: Queryable, file: ChunkedFile, seq: number): Promise<Buffer> {
  const row = await q
    .selectFrom(file.table)
    .select("data")
    .where("file_id", "=", file.fileId)
    .where("seq", "=", seq)
    .executeTakeFirst();
  const expected = Math.min(FILE_CHUNK_BYTES, file.size - seq * FILE_CHUNK_BYTES);
  if (!row || row.data.length !== expected) {
    throw new FileChangedError(file);
  }
  return Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data);
}

/** The first bytes of a stored file (its first chunk, at most), e.g. to check what it is. */
export async function readHead(q: Queryable, file: StoredFile, n: number): Promise<Buffer> {
  if (file.size === 0) return Buffer.alloc(0);
  return (await readChunk(q, itemChunks(file), 0)).subarray(0, n);
}

/**
 * A stream of a stored item file, reading the next chunk only when the consumer has taken the last
 * one: one chunk in memory per reader, whatever the file's size. It fails (and a download ends
 * short, so the client sees it was cut) if the file is replaced while it is read.
 */
export function readStream(q: Queryable, file: StoredFile): Readable {
  return streamChunks(q, itemChunks(file));
}

/** A stream of the chunks of any stored file, as `readStream` reads an item file. */
export function streamChunks(q: Queryable, file: ChunkedFile): Readable {
  const count = chunkCount(file.size);
  let seq = 0;
  return new Readable({
    read() {
      if (seq >= count) {
        this.push(null);
        return;
      }
      readChunk(q, file, seq).then(
        (chunk) => {
          seq += 1;
          this.push(chunk);
        },
        (err: Error) => this.destroy(err),
      );
    },
  });
}

/** Bytes of chunks `readAllOf` asks for in one statement, at most. */
const READ_STATEMENT_BYTES = 8 * FILE_CHUNK_BYTES;

/**
 * The files of `kinds` of several items, whole in memory, as `readAll` reads each: one statement
 * for their rows and one per few MB of files of a single chunk, rather than two per file. A file
 * of several chunks, or one replaced while it is read, is read alone by `readAll`. Answers by
 * item id, then kind; items without a file of a kind have no entry for it.
 */
export async function readAllOf(
  q: Queryable,
  itemIds: readonly string[],
  kinds: readonly FileKind[],
): Promise<Map<string, Map<FileKind, { file: StoredFile; bytes: Buffer }>>> {
  const out = new Map<string, Map<FileKind, { file: StoredFile; bytes: Buffer }>>();
  if (itemIds.length === 0 || kinds.length === 0) return out;
  const rows = await q
    .selectFrom("item_files")
    .select(["item_id", "kind", "name", "content_type", "file_id", "size", "created", "access"])
    .where("item_id", "in", [...itemIds])
    .where("kind", "in", [...kinds])
    .execute();
  const put = (file: StoredFile, bytes: Buffer) => {
    let byKind = out.get(file.itemId);
    if (!byKind) {
      byKind = new Map();
      out.set(file.itemId, byKind);
    }
    byKind.set(file.kind, { file, bytes });
  };
  const alone = async (file: StoredFile) => {
    const read = await readAll(q, file.itemId, file.kind);
    if (read) put(read.file, read.bytes);
  };
  const small: StoredFile[] = [];
  for (const row of rows) {
    const file = storedFile(row);
    if (file.size === 0) put(file, Buffer.alloc(0));
    else if (file.size <= FILE_CHUNK_BYTES) small.push(file);
    else await alone(file);
  }
  for (let i = 0; i < small.length; ) {
    const group: StoredFile[] = [];
    let bytes = 0;
    while (
      i < small.length &&
      (group.length === 0 || bytes + (small[i] as StoredFile).size <= READ_STATEMENT_BYTES)
    ) {
      const file = small[i++] as StoredFile;
      group.push(file);
      bytes += file.size;
    }
    const chunks = await q
      .selectFrom("item_file_chunks")
      .select(["file_id", "data"])
      .where(
        "file_id",
        "in",
        group.map((f) => f.fileId),
      )
      .where("seq", "=", 0)
      .execute();
    const byFile = new Map(chunks.map((c) => [c.file_id, c.data]));
    for (const file of group) {
      const data = byFile.get(file.fileId);
      // Replaced or deleted since its row was read: read as it is now.
      if (!data || data.length !== file.size) await alone(file);
      else put(file, Buffer.isBuffer(data) ? data : Buffer.from(data));
    }
  }
  return out;
}

/**
 * A whole stored file in memory, or undefined when the item has none of that kind. Only for what
 * needs it whole (collaboration packages carry files base64 in JSON); answers to clients stream
 * instead. A file replaced while it is read is read again, as it is now.
 */
export async function readAll(
  q: Queryable,
  itemId: string,
  kind: FileKind,
): Promise<{ file: StoredFile; bytes: Buffer } | undefined> {
  for (let attempt = 1; ; attempt++) {
    const file = await findFile(q, itemId, kind);
    if (!file) return undefined;
    try {
      const chunks: Buffer[] = [];
      for (let seq = 0; seq < chunkCount(file.size); seq++)
        chunks.push(await readChunk(q, itemChunks(file), seq));
      return { file, bytes: Buffer.concat(chunks, file.size) };
    } catch (err) {
      if (!(err instanceof FileChangedError) || attempt >= 3) throw err;
    }
  }
}
