import { ApiClient } from "./client";
import { resolveCredentials, type CliEnv } from "./config";
import { printable } from "./format";
import { Prompter, type Io } from "./prompt";

/** What every command gets: its streams, environment, output mode and (lazily) an API client. */
export class Ctx {
  readonly prompter: Prompter;
  private apiClient: ApiClient | null = null;

  constructor(
    readonly io: Io,
    readonly env: CliEnv,
    readonly json: boolean,
  ) {
    this.prompter = new Prompter(io);
  }

  api(): ApiClient {
    this.apiClient ??= new ApiClient(resolveCredentials({ env: this.env }));
    return this.apiClient;
  }

  /** A line for people (suppressed with --json), with terminal control characters made visible. */
  say(text: string) {
    if (!this.json) this.io.stdout.write(`${printable(text)}\n`);
  }

  /** Text for people on stderr (prompts' context, warnings), with terminal control characters made visible. */
  tell(text: string) {
    this.io.stderr.write(printable(text));
  }

  /** The result for scripts: pretty JSON on stdout (only with --json). */
  result(value: unknown) {
    if (this.json) this.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** One JSON value per line, for streams (watch --json). */
  line(value: unknown) {
    this.io.stdout.write(`${JSON.stringify(value)}\n`);
  }
}
