import { randomUUID } from "node:crypto";
import fs from "node:fs";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Busboy, type BusboyFileStream } from "@fastify/busboy";
import { errors, PorticoError } from "../errors.js";

/**
 * Streaming reader of multipart/form-data bodies. Fields are kept in memory within a byte budget;
 * the files a route declares are streamed to temporary files with their caps enforced while the
 * bytes arrive; files of any other field are read past and dropped. Nothing of a file is held in
 * memory beyond the stream buffers.
 */

/** A file sent in a multipart/form-data request (an item's data, a thumbnail), in a temporary file. */
export interface UploadedFile {
  filename: string;
  contentType: string;
  /** Bytes received. */
  size: number;
  /** The temporary file holding them; removed once the request is answered. */
  path: string;
}

export interface FileLimit {
  maxBytes: number;
}

export interface MultipartOptions {
  /** Bytes of all field values together (the route's `bodyLimit`). */
  fieldBytes: number;
  /** Fields and parts at most. */
  maxParts: number;
  /** The file fields the route takes, each with its cap; other file parts are dropped. */
  files: Readonly<Record<string, FileLimit>>;
  /** Where the temporary files go. */
  dir: string;
  /**
   * Runs once, before the first declared file is written, with the fields read so far: the
   * pipeline authenticates there when the token came before the file. Throwing refuses the request.
   */
  beforeFirstFile: (fields: Readonly<Record<string, string>>) => Promise<void>;
  /**
   * Called as the body arrives with the bytes of it that are not file contents (what is held in
   * memory); false refuses the request (`errors.preAuthBudgetSpent`). Absent: not bounded so.
   */
  coverFieldBytes?: (bytes: number) => boolean;
  /**
   * Called as declared files are written with the bytes written so far (all files together); false
   * refuses the request (`errors.preAuthBudgetSpent`). Absent: not bounded so.
   */
  coverFileBytes?: (bytes: number) => boolean;
  /** Told of every chunk of the body as it arrives (to watch that the body keeps arriving). */
  progress?: (bytes: number) => void;
  /** Aborted to refuse the request while it is read; its reason is the error to answer. */
  signal?: AbortSignal;
}

export interface MultipartBody {
  fields: Record<string, string>;
  files: Record<string, UploadedFile>;
}

/** Room for the boundaries and part headers around fields and files, per part. */
const PART_OVERHEAD = 1024;

/** The most bytes a multipart body may have for these limits. */
export function multipartLimit(options: Pick<MultipartOptions, "fieldBytes" | "maxParts" | "files">): number {
  const files = Object.values(options.files).reduce((sum, f) => sum + f.maxBytes, 0);
  return options.fieldBytes + files + options.maxParts * PART_OVERHEAD;
}

/** Removes the temporary files of an upload; a file already gone is no failure. */
export async function removeUploads(files: Iterable<UploadedFile | string>): Promise<void> {
  await Promise.all(
    [...files].map((f) => fs.promises.rm(typeof f === "string" ? f : f.path, { force: true })),
  );
}

/**
 * Reads the multipart body of `raw`. Resolves with the fields and the declared files once the
 * whole body is read; rejects with the envelope error to answer (limits, broken body, a refused
 * caller, a request cut off or stalled), once every file it was writing is closed and every
 * temporary file it wrote is removed, and without reading further: the rest of the body is the
 * caller's to drop (`sendError` reads past it for a moment, then cuts the connection).
 */
export function readMultipart(
  raw: IncomingMessage,
  headers: IncomingHttpHeaders,
  options: MultipartOptions,
): Promise<MultipartBody> {
  const fields: Record<string, string> = Object.create(null);
  const files: Record<string, UploadedFile> = Object.create(null);
  const written = new Set<string>();
  const maxTotal = multipartLimit(options);
  const maxFile = Math.max(0, ...Object.values(options.files).map((f) => f.maxBytes));
  let fieldBytes = 0;
  /** Bytes of file contents received, kept or dropped (a part the parser holds is counted once written). */
  let fileBytes = 0;
  /** Bytes of declared files written. */
  let storedBytes = 0;
  let firstFile = true;
  let failure: Error | undefined;
  /** The declared file being written, destroyed when the request fails so that its write ends. */
  let current: BusboyFileStream | undefined;
  /** File parts are handled one after the other, in the order they arrive. */
  let chain: Promise<void> = Promise.resolve();

  return new Promise<MultipartBody>((resolve, reject) => {
    let received = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        received += chunk.length;
        options.progress?.(chunk.length);
        if (received > maxTotal) callback(errors.bodyTooLarge(maxTotal));
        else if (options.coverFieldBytes && !options.coverFieldBytes(received - fileBytes)) {
          callback(errors.preAuthBudgetSpent());
        } else callback(null, chunk);
      },
    });
    let busboy: InstanceType<typeof Busboy>;
    try {
      busboy = new Busboy({
        headers: headers as IncomingHttpHeaders & { "content-type": string },
        limits: {
          fields: options.maxParts,
          parts: options.maxParts,
          files: options.maxParts,
          fieldNameSize: 256,
          fieldSize: options.fieldBytes,
          // One byte over the largest cap, so that the meter of the file sees it and says which.
          fileSize: maxFile + 1,
          headerPairs: 16,
        },
      });
    } catch (err) {
      reject(errors.badBody(`The multipart body cannot be read: ${(err as Error).message}.`));
      return;
    }

    const fail = (err: unknown) => {
      if (failure) return;
      failure =
        err instanceof PorticoError
          ? err
          : errors.badBody(`The multipart body cannot be read: ${(err as Error).message}.`);
      raw.unpipe(meter);
      meter.unpipe(busboy);
      raw.off("close", onClose);
      options.signal?.removeEventListener("abort", onAbort);
      raw.pause();
      // Nothing more reaches the parser, so a file in progress would never end: destroying it
      // fails its write (which closes the temporary file), and the chain settles. Without an
      // error: the stream may have no listener yet (its caller being checked), and an 'error'
      // event without one would end the process.
      current?.destroy();
      // Let a file write in progress stop before its file is removed.
      chain
        .finally(() => removeUploads(written))
        .then(
          () => reject(failure),
          () => reject(failure),
        );
    };
    const onClose = () => {
      if (!raw.complete) fail(errors.badBody("The request ended before its body was complete."));
    };
    const onAbort = () => fail(options.signal?.reason);

    busboy.on("field", (name: string, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
      if (failure) return;
      fieldBytes += value.length;
      if (valueTruncated || fieldBytes > options.fieldBytes) {
        fail(errors.bodyTooLarge(options.fieldBytes, "The parameters of the request, files aside,"));
        return;
      }
      fields[name] = value;
    });

    busboy.on(
      "file",
      (name: string, stream: BusboyFileStream, filename: string, _enc: string, type: string) => {
        const limit = Object.hasOwn(options.files, name) ? options.files[name] : undefined;
        if (!limit || failure) {
          // A file this operation does not take: read past it, keep nothing.
          stream.on("data", (chunk: Buffer) => {
            fileBytes += chunk.length;
          });
          stream.resume();
          return;
        }
        chain = chain.then(async () => {
          if (failure) {
            stream.resume();
            return;
          }
          current = stream;
          if (firstFile) {
            firstFile = false;
            await options.beforeFirstFile(fields);
          }
          if (failure) {
            stream.resume();
            return;
          }
          const file = path.join(options.dir, `upload-${randomUUID()}`);
          written.add(file);
          let size = 0;
          const cap = new Transform({
            transform(chunk: Buffer, _encoding, callback) {
              size += chunk.length;
              fileBytes += chunk.length;
              storedBytes += chunk.length;
              if (size > limit.maxBytes) callback(errors.fileTooLarge(name, limit.maxBytes));
              else if (options.coverFileBytes && !options.coverFileBytes(storedBytes)) {
                callback(errors.preAuthBudgetSpent());
              } else callback(null, chunk);
            },
          });
          await pipeline(stream, cap, fs.createWriteStream(file, { flags: "wx", mode: 0o600 }));
          current = undefined;
          // A repeated file field: the last one counts, as for every parameter.
          const previous = files[name];
          if (previous) {
            written.delete(previous.path);
            await removeUploads([previous]);
          }
          files[name] = {
            filename: filename || name,
            contentType: type || "application/octet-stream",
            size,
            path: file,
          };
        });
        chain.catch((err: unknown) => {
          stream.resume();
          fail(err);
        });
      },
    );

    for (const event of ["fieldsLimit", "partsLimit", "filesLimit"] as const) {
      busboy.on(event, () => fail(errors.tooManyParameters(options.maxParts)));
    }
    busboy.on("error", fail);
    meter.on("error", fail);
    busboy.on("finish", () => {
      chain.then(
        () => {
          if (failure) return;
          raw.off("close", onClose);
          options.signal?.removeEventListener("abort", onAbort);
          resolve({ fields, files });
        },
        () => {
          // Reported by the file's own handler.
        },
      );
    });
    raw.on("close", onClose);
    raw.on("error", fail);
    if (options.signal?.aborted) {
      onAbort();
      return;
    }
    options.signal?.addEventListener("abort", onAbort, { once: true });
    raw.pipe(meter).pipe(busboy);
  });
}
