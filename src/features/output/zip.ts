import fs from "node:fs";
import { pipeline } from "node:stream/promises";
import zlib from "node:zlib";

/**
 * A zip archive written from files on disk, one entry after the other, each deflated as it is
 * read: nothing holds more than a stream's buffer in memory. Sizes and CRC-32 follow each entry in
 * a data descriptor (general purpose bit 3), so the archive is written front to back without
 * seeking. No Zip64: an archive and each entry stay under 4 GB (callers cap exports far below).
 */

export interface ZipEntry {
  /** The name inside the archive (UTF-8, bit 11 set). */
  name: string;
  /** The file on disk to store. */
  path: string;
}

/** The most an archive or one of its entries may hold without Zip64. */
const ZIP32_LIMIT = 0xffff_ffff;

const FLAGS = 0x0808; // data descriptor follows; names are UTF-8
const DEFLATE = 8;
const VERSION = 20;

/** The DOS date and time of `at` (local fields as zip readers show them; UTC here, stated). */
function dosDateTime(at: Date): { time: number; date: number } {
  const time = (at.getUTCHours() << 11) | (at.getUTCMinutes() << 5) | Math.floor(at.getUTCSeconds() / 2);
  const date = ((at.getUTCFullYear() - 1980) << 9) | ((at.getUTCMonth() + 1) << 5) | at.getUTCDate();
  return { time, date };
}

/** How much of an entry is read between two calls of `progress`. */
export const ZIP_PROGRESS_BYTES = 16 * 1024 * 1024;

export interface ZipOptions {
  /** The entries' time (now by default). */
  at?: Date;
  /**
   * Called before each entry and after each `ZIP_PROGRESS_BYTES` of an entry: a long archive's
   * writer renews what it holds there (an export job its lease); what it throws stops the writing.
   */
  progress?: () => Promise<void>;
}

/** Writes `entries` into a new archive at `target`; answers its size in bytes. */
export async function writeZip(
  target: string,
  entries: readonly ZipEntry[],
  options: ZipOptions = {},
): Promise<number> {
  const { time, date } = dosDateTime(options.at ?? new Date());
  const progress = options.progress;
  const handle = await fs.promises.open(target, "wx");
  let offset = 0;
  const write = async (buffer: Buffer) => {
    if (offset + buffer.length > ZIP32_LIMIT) throw new Error("the archive would be larger than 4 GB");
    await handle.write(buffer, 0, buffer.length, offset);
    offset += buffer.length;
  };
  const central: Buffer[] = [];
  try {
    for (const entry of entries) {
      await progress?.();
      const name = Buffer.from(entry.name, "utf8");
      const headerOffset = offset;
      const local = Buffer.alloc(30);
      local.writeUInt32LE(0x04034b50, 0);
      local.writeUInt16LE(VERSION, 4);
      local.writeUInt16LE(FLAGS, 6);
      local.writeUInt16LE(DEFLATE, 8);
      local.writeUInt16LE(time, 10);
      local.writeUInt16LE(date, 12);
      // CRC and sizes (14..25) stay zero: the data descriptor carries them.
      local.writeUInt16LE(name.length, 26);
      await write(Buffer.concat([local, name]));
      let crc = 0;
      let size = 0;
      const dataStart = offset;
      await pipeline(
        fs.createReadStream(entry.path),
        async function* (source: AsyncIterable<Buffer>) {
          let sinceProgress = 0;
          for await (const chunk of source) {
            crc = zlib.crc32(chunk, crc);
            size += chunk.length;
            sinceProgress += chunk.length;
            if (progress && sinceProgress >= ZIP_PROGRESS_BYTES) {
              sinceProgress = 0;
              await progress();
            }
            yield chunk;
          }
        },
        zlib.createDeflateRaw(),
        async (deflated: AsyncIterable<Buffer>) => {
          for await (const chunk of deflated) await write(chunk);
        },
      );
      const compressed = offset - dataStart;
      if (size > ZIP32_LIMIT) throw new Error(`entry ${entry.name} is larger than 4 GB`);
      const descriptor = Buffer.alloc(16);
      descriptor.writeUInt32LE(0x08074b50, 0);
      descriptor.writeUInt32LE(crc >>> 0, 4);
      descriptor.writeUInt32LE(compressed, 8);
      descriptor.writeUInt32LE(size, 12);
      await write(descriptor);
      const record = Buffer.alloc(46);
      record.writeUInt32LE(0x02014b50, 0);
      record.writeUInt16LE(VERSION, 4);
      record.writeUInt16LE(VERSION, 6);
      record.writeUInt16LE(FLAGS, 8);
      record.writeUInt16LE(DEFLATE, 10);
      record.writeUInt16LE(time, 12);
      record.writeUInt16LE(date, 14);
      record.writeUInt32LE(crc >>> 0, 16);
      record.writeUInt32LE(compressed, 20);
      record.writeUInt32LE(size, 24);
      record.writeUInt16LE(name.length, 28);
      // Extra, comment, disk, internal and external attributes: zero.
      record.writeUInt32LE(headerOffset, 42);
      central.push(record, name);
    }
    const directoryStart = offset;
    for (const part of central) await write(part);
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(entries.length, 8);
    end.writeUInt16LE(entries.length, 10);
    end.writeUInt32LE(offset - directoryStart, 12);
    end.writeUInt32LE(directoryStart, 16);
    await write(end);
    return offset;
  } finally {
    await handle.close();
  }
}
