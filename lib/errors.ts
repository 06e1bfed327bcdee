/**
 * One typed error for the whole app. The code says what failed and where ("type:surface"); it knows its HTTP status
 * and whether its message may be shown to the caller.
 */

export type ErrorType =
  | "bad_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "unprocessable"
  | "rate_limited"
  | "unavailable"
  | "internal";

export type Surface =
  | "api"
  | "auth"
  | "database"
  | "project"
  | "run"
  | "gate"
  | "clarification"
  | "config"
  | "executor"
  | "model"
  | "sandbox"
  | "git"
  | "github"
  | "mermaid"
  | "token"
  | "backup"
  | "notification"
  | "chat";

export type ErrorCode = `${ErrorType}:${Surface}`;

type Visibility = "response" | "log";

const statusByType: Record<ErrorType, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unprocessable: 422,
  rate_limited: 429,
  unavailable: 503,
  internal: 500,
};

/** Database and internal failures are logged in full but answered with a generic message. */
const visibilityBySurface: Partial<Record<Surface, Visibility>> = { database: "log" };

const defaultMessages: Partial<Record<ErrorType, string>> = {
  bad_request: "The request is invalid.",
  unauthorized: "Sign in, or send Authorization: Bearer <token>.",
  forbidden: "You do not have permission to do that.",
  not_found: "Not found.",
  conflict: "The request conflicts with the current state.",
  payload_too_large: "The request body is too large.",
  unprocessable: "The request is well-formed but could not be processed.",
  rate_limited: "Too many requests; slow down.",
  unavailable: "The service is temporarily unavailable.",
  internal: "Something went wrong on our side.",
};

export class AppError extends Error {
  readonly type: ErrorType;
  readonly surface: Surface;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  readonly headers?: Record<string, string>;

  constructor(
    code: ErrorCode,
    message?: string,
    options: { cause?: unknown; details?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    const [type, surface] = code.split(":") as [ErrorType, Surface];
    super(message ?? defaultMessages[type] ?? "Error", { cause: options.cause });
    this.name = "AppError";
    this.type = type;
    this.surface = surface;
    this.status = statusByType[type];
    this.details = options.details;
    this.headers = options.headers;
  }

  get code(): ErrorCode {
    return `${this.type}:${this.surface}`;
  }

  get visible(): boolean {
    return this.type !== "internal" && visibilityBySurface[this.surface] !== "log";
  }

  toJSON() {
    return {
      error: {
        code: this.code,
        message: this.visible ? this.message : (defaultMessages[this.type] ?? "Error"),
        ...(this.visible && this.details ? { details: this.details } : {}),
      },
    };
  }

  toResponse(): Response {
    return Response.json(this.toJSON(), { status: this.status, headers: this.headers });
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}

/** Format zod issues as "field: message; field: message" so a 400 names what to fix. */
export function describeIssues(issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string {
  return issues
    .slice(0, 10)
    .map((issue) => {
      const where = issue.path.map(String).join(".");
      return where ? `${where}: ${issue.message}` : issue.message;
    })
    .join("; ");
}
