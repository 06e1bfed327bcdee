import { getEnv } from "@/lib/env";
import { AppError, type Surface } from "@/lib/errors";

/*
 * Reading request bodies without letting the sender decide how much memory they take. Every body is read as a stream
 * with a cap: refused by Content-Length before a byte is read, or as soon as the stream passes the cap (the rest is
 * never read). Bodies read before the sender is known (a webhook or an Inngest call, whose signature covers the body;
 * the sign-in form) also count against one process-wide budget, GATEHOUSE_UNVERIFIED_BODY_BYTES: a request that would
 * take it past the budget is refused with 503 and Retry-After, so many slow senders with wrong signatures cannot
 * fill the server's memory. Their bytes count from the first chunk until the body has been read; callers check the
 * signature right after, before anything else runs.
 */

export const UNVERIFIED_RETRY_AFTER_SECONDS = 5;

let unverifiedBytes = 0;

/** Bytes of unverified bodies being read in this process right now. */
export function unverifiedBytesInFlight(): number {
  return unverifiedBytes;
}

/** The declared Content-Length, when there is a valid one. */
export function declaredLength(request: Request): number | undefined {
  const value = request.headers.get("content-length")?.trim();
  return value && /^\d+$/.test(value) ? Number(value) : undefined;
}

/** Refuse a request without reading its body: the unread body is released, not drained into memory. */
export async function discardBody(request: Request): Promise<void> {
  await request.body?.cancel().catch(() => {});
}

/** A body read into memory, to build the request handed on from it (a view, not a copy); undefined when empty. */
export function bufferedBody(body: Buffer): Uint8Array<ArrayBuffer> | undefined {
  return body.length ? new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength) : undefined;
}

type ReadOptions = {
  request: Request;
  /** Largest body accepted, in bytes. */
  limit: number;
  /** The error for a body over `limit` (a 413). */
  tooLarge: () => Error;
  /** Sees every chunk as it arrives (a streaming HMAC). */
  onChunk?: (chunk: Uint8Array) => void;
  /** Called before a chunk is kept, with the bytes it adds; false refuses the body with `refused`. */
  admit?: (bytes: number) => boolean;
  refused?: () => Error;
};

/** Read a whole body, never holding more than `limit` bytes of it. Raw bytes, so a signature sees what was sent. */
export async function readCappedBody({ request, limit, tooLarge, onChunk, admit, refused }: ReadOptions): Promise<Buffer> {
  const declared = declaredLength(request);
  if (declared !== undefined && declared > limit) {
    await discardBody(request);
    throw tooLarge();
  }
  if (!request.body) return Buffer.alloc(0);
  // What Content-Length announces is admitted up front, so a request that cannot fit is refused before it is read.
  // (No closures here: under tsx every named one costs a `__name` call per body, and every checkpoint reads one.)
  let admitted = 0;
  const reader = request.body.getReader();
  if (declared) {
    if (admit && !admit(declared)) return stopReading(reader, (refused ?? tooLarge)());
    admitted = declared;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) return stopReading(reader, tooLarge());
    if (size > admitted) {
      if (admit && !admit(size - admitted)) return stopReading(reader, (refused ?? tooLarge)());
      admitted = size;
    }
    onChunk?.(value);
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

/** Stop reading a body refused part way: the rest is released unread, and the refusal thrown. */
async function stopReading(reader: ReadableStreamDefaultReader<Uint8Array>, error: Error): Promise<never> {
  await reader.cancel().catch(ignoreCancelFailure);
  throw error;
}

const ignoreCancelFailure = () => {};

const overLimit = Symbol("over the limit");
const overLimitError = () => Object.assign(new Error("over the limit"), { [overLimit]: true });

/** A body's text within `limit` bytes, or null when it is larger (nothing past the limit is read). */
export async function readCappedText(request: Request, limit: number): Promise<string | null> {
  try {
    return (await readCappedBody({ request, limit, tooLarge: overLimitError })).toString("utf8");
  } catch (error) {
    if (error instanceof Error && overLimit in error) return null;
    throw error;
  }
}

/**
 * Read the body of a request whose sender is not known yet, within `limit` (413 beyond, code `payload_too_large:
 * <surface>`) and within the process-wide budget of unverified bytes (503 `unavailable:<surface>` with Retry-After).
 */
export async function readUnverifiedBody({
  request,
  limit,
  surface,
  what,
  onChunk,
}: {
  request: Request;
  limit: number;
  surface: Surface;
  /** What the body is, for the messages ("The webhook body"). */
  what: string;
  onChunk?: (chunk: Uint8Array) => void;
}): Promise<Buffer> {
  const budget = getEnv().GATEHOUSE_UNVERIFIED_BODY_BYTES;
  let held = 0;
  try {
    return await readCappedBody({
      request,
      limit,
      onChunk,
      tooLarge: () => new AppError(`payload_too_large:${surface}`, `${what} is larger than ${limit} bytes.`),
      admit: (bytes) => {
        if (unverifiedBytes + bytes > budget) return false;
        unverifiedBytes += bytes;
        held += bytes;
        return true;
      },
      refused: () =>
        new AppError(
          `unavailable:${surface}`,
          `Too many request bodies are being received at once (GATEHOUSE_UNVERIFIED_BODY_BYTES); retry in ${UNVERIFIED_RETRY_AFTER_SECONDS} s.`,
          { headers: { "retry-after": String(UNVERIFIED_RETRY_AFTER_SECONDS) } },
        ),
    });
  } finally {
    unverifiedBytes -= held;
  }
}
