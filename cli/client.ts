import { CLI, CliError, EXIT, exitCodeForStatus } from "./errors";
import type { Credentials } from "./config";

/** What the server's error body looks like: `{"error": {"code", "message"}}`. */
type ApiErrorBody = { error?: { code?: string; message?: string } };

/** A thin client of the public HTTP API, authenticated with `Authorization: Bearer <token>`. */
export class ApiClient {
  constructor(private readonly credentials: Credentials) {}

  get url(): string {
    return this.credentials.url;
  }

  async get<T>(path: string): Promise<T> {
    return this.request<T>({ method: "GET", path });
  }

  async post<T>(path: string, body?: unknown): Promise<T> {
    return this.request<T>({ method: "POST", path, body: body ?? {} });
  }

  private async request<T>({ method, path, body }: { method: string; path: string; body?: unknown }): Promise<T> {
    const response = await this.fetch(path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      throw new CliError(EXIT.server, `${method} ${path}: the server answered ${response.status} with a body that is not JSON; is ${this.url} a Gatehouse server?`);
    }
    if (!response.ok) throw this.errorFor({ status: response.status, body: parsed as ApiErrorBody, path });
    return parsed as T;
  }

  /** fetch with the token; a network failure becomes an error that names the server. */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${this.credentials.token}`);
    headers.set("accept", headers.get("accept") ?? "application/json");
    try {
      return await fetch(`${this.url}${path}`, { ...init, headers });
    } catch (error) {
      if (init.signal?.aborted) throw error;
      const reason = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error);
      throw new CliError(EXIT.server, `Cannot reach ${this.url} (${reason}). Is the server running? Check the URL with \`${CLI} login\` or GATEHOUSE_URL.`);
    }
  }

  errorFor({ status, body, path }: { status: number; body: ApiErrorBody | null; path: string }): CliError {
    const code = body?.error?.code;
    const message = body?.error?.message ?? `HTTP ${status}`;
    const exitCode = exitCodeForStatus(status);
    if (status === 401) {
      return new CliError(exitCode, `The server refused the token (${message}). Create a token in the dashboard (or use GATEHOUSE_ADMIN_TOKEN) and run \`${CLI} login\` again.`, code);
    }
    if (status === 403) return new CliError(exitCode, `Not allowed: ${message} Ask a project owner for the approver role.`, code);
    if (status === 404) return new CliError(exitCode, `Not found: ${message} (${path}). Check the id with \`${CLI} runs\` or \`${CLI} projects\`.`, code);
    if (status === 409) return new CliError(exitCode, `Conflict: ${message} See the run's state with \`${CLI} logs <run>\`.`, code);
    if (status === 429) return new CliError(exitCode, `Rate limited: ${message} Wait a minute and try again.`, code);
    if (status >= 500) return new CliError(exitCode, `The server failed (${status}): ${message}`, code);
    return new CliError(exitCode, message, code);
  }

  /**
   * Follow an SSE endpoint, reconnecting with Last-Event-ID when the server ends a response early (it caps a
   * response's lifetime) or the connection drops. Resolves with the `end` message's data.
   */
  async stream({
    path,
    after = 0,
    onEvent,
    signal,
  }: {
    path: string;
    after?: number;
    onEvent: (message: { id: string | null; event: string; data: unknown }) => Promise<void> | void;
    signal?: AbortSignal;
  }): Promise<unknown> {
    let lastId = String(after);
    let failures = 0;
    for (;;) {
      const response = await this.fetch(path, { headers: { accept: "text/event-stream", "last-event-id": lastId }, signal });
      if (!response.ok) {
        const body = (await response.json().catch(() => null)) as ApiErrorBody | null;
        throw this.errorFor({ status: response.status, body, path });
      }
      let ended: { data: unknown } | null = null;
      try {
        for await (const message of parseSse(response.body!)) {
          failures = 0;
          if (message.id !== null) lastId = message.id;
          if (message.event === "end") {
            ended = { data: message.data };
            break;
          }
          if (message.event === "error") {
            const m = (message.data as { message?: string } | null)?.message ?? "stream failed";
            throw new CliError(EXIT.server, `The server's event stream failed: ${m}`);
          }
          await onEvent(message);
        }
      } catch (error) {
        if (error instanceof CliError || signal?.aborted) throw error;
        // a dropped connection: reconnect below
      }
      if (ended) return ended.data;
      if (signal?.aborted) return null;
      failures += 1;
      if (failures > 5) throw new CliError(EXIT.server, `Lost the event stream from ${this.url} five times in a row; run \`${CLI} watch\` again.`);
      await new Promise((r) => setTimeout(r, 500 * failures));
    }
  }
}

/** Parse a text/event-stream body into messages (id, event, data as JSON). */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id: string | null; event: string; data: unknown }> {
  const decoder = new TextDecoder();
  let buffer = "";
  let id: string | null = null;
  let event = "message";
  let data: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length) {
          const text = data.join("\n");
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: hand the text on
          }
          yield { id, event, data: parsed };
        }
        id = null;
        event = "message";
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
  }
}
