/**
 * An answer already encoded by the operation (a protocol buffer), sent as it is. It sits beside
 * `errors.ts`, outside any layer: operations make it and the HTTP layer sends it, and the
 * operations must not import the HTTP layer.
 */
export class EncodedBody {
  constructor(
    readonly contentType: string,
    readonly content: Uint8Array,
  ) {}
}
