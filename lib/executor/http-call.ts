import http from "node:http";
import https from "node:https";

/**
 * The executor's calls to an app over HTTP (a call, a sync), on node:http with keep-alive agents rather than `fetch`.
 * On Node 20 a loopback `fetch` costs about 0.5 ms of CPU more per call than node:http (its Request, Headers, web
 * streams and abort signal are built and read back on every call, and each of their promises passes the async hooks
 * that the SDK's AsyncLocalStorage turns on), and a resumed run waits on one such call.
 *
 * What stays as it was with `fetch`: one connection per call in flight, kept open between calls; a free connection is
 * closed before the server's announced keep-alive timeout (`Keep-Alive: timeout=N`, Node's Agent honours the hint
 * below `timeout`) and after 4 s idle otherwise (undici's default); the whole call (connect, request, response body)
 * is bounded by `timeoutMs`, and running out of it fails with a `TimeoutError`, the name `fetch` gives it.
 */

/** A response read to its end: what the protocol reads of a `Response` (status, a header, the text). */
export type CallResponse = {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
};

/** Idle time after which a kept connection is closed (undici's keepAliveTimeout default). */
const IDLE_MS = 4_000;
const agents = {
  "http:": new http.Agent({ keepAlive: true, timeout: IDLE_MS, noDelay: true } as http.AgentOptions),
  "https:": new https.Agent({ keepAlive: true, timeout: IDLE_MS, noDelay: true } as https.AgentOptions),
};

/** How many times a call is sent again when a kept connection turns out to be closed before it answered a byte. */
const STALE_RETRIES = 2;

class TimeoutError extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = "TimeoutError";
  }
}

/** Headers of a node response, read the way `Headers.get` reads them (a repeated header joined with ", "). */
class ReceivedHeaders {
  constructor(private readonly raw: http.IncomingHttpHeaders) {}
  get(name: string): string | null {
    const value = this.raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }
}

/**
 * Send `body` to `url` and read the whole answer. A kept connection that the server closed while it sat idle (the
 * request is refused or reset before any byte of an answer, on a reused socket) is not the app's failure: the call
 * goes again on another connection, as Node's documentation advises for `reusedSocket`.
 */
export async function httpCall(
  url: URL,
  { method, headers, body }: { method: string; headers: Record<string, string>; body: string },
  timeoutMs: number,
): Promise<CallResponse> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await once(url, method, headers, body, Math.max(0, deadline - Date.now()), timeoutMs);
    } catch (err) {
      if (!(err instanceof StaleConnection) || attempt >= STALE_RETRIES) throw err instanceof StaleConnection ? err.cause : err;
    }
  }
}

class StaleConnection extends Error {
  constructor(readonly cause: Error) {
    super(cause.message);
  }
}

function once(url: URL, method: string, headers: Record<string, string>, body: string, remainingMs: number, timeoutMs: number): Promise<CallResponse> {
  const agent = agents[url.protocol as keyof typeof agents];
  if (!agent) return Promise.reject(new Error(`unsupported protocol ${url.protocol}`));
  const transport = url.protocol === "https:" ? https : http;
  return new Promise<CallResponse>((resolve, reject) => {
    let answered = false;
    const req = transport.request(url, {
      method,
      agent,
      headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
    });
    const timer = setTimeout(() => req.destroy(new TimeoutError(timeoutMs)), remainingMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      const code = (err as NodeJS.ErrnoException).code;
      const stale = !answered && req.reusedSocket && (code === "ECONNRESET" || code === "EPIPE" || code === "ECONNABORTED");
      reject(stale ? new StaleConnection(err) : err);
    };
    req.once("error", fail);
    req.once("response", (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
      });
      res.once("error", fail);
      res.once("aborted", () => fail(Object.assign(new Error("the app closed the connection before its answer ended"), { code: "ECONNRESET" })));
      res.once("end", () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks, size).toString("utf8");
        resolve({ status: res.statusCode ?? 0, headers: new ReceivedHeaders(res.headers), text: () => Promise.resolve(text) });
      });
    });
    req.end(body);
  });
}
