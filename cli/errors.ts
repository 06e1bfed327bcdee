/** Exit codes of `gatehouse` (documented in README.md). */
export const EXIT = {
  ok: 0,
  /** the run failed or was cancelled (watch) */
  runFailed: 1,
  /** bad arguments or input (including a 400, 413 or 422 from the server) */
  usage: 2,
  /** not logged in, token refused (401) or not allowed (403) */
  auth: 3,
  /** the run, project or question does not exist or is not visible to you (404) */
  notFound: 4,
  /** the decision does not fit the run's state (409): already decided, answered, finished */
  conflict: 5,
  /** the server is unreachable, failed (5xx) or asks to slow down (429) */
  server: 6,
  /** watch --stop-when-waiting: the run waits for a person (approval, answer, fix decision, paused) */
  waiting: 10,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI reports as one line (what to fix) and exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}

export function exitCodeForStatus(status: number): ExitCode {
  if (status === 400 || status === 413 || status === 422) return EXIT.usage;
  if (status === 401 || status === 403) return EXIT.auth;
  if (status === 404) return EXIT.notFound;
  if (status === 409) return EXIT.conflict;
  return EXIT.server;
}

/**
 * How a person runs this CLI, for the commands its messages suggest. The package is not published; in a checkout it
 * is `npx gatehouse` (npx also finds a global install, `npm link`), whereas a bare `gatehouse` is "command not found".
 */
export const CLI = "npx gatehouse";
