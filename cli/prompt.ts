import readline from "node:readline";
import { CliError, EXIT } from "./errors";

export type Io = {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream;
};

/**
 * Line prompts on stdin (a terminal or a pipe). Questions go to stderr so stdout stays clean for --json. One reader per
 * command, so several answers can be piped in at once.
 */
export class Prompter {
  private lines: string[] = [];
  private waiting: ((line: string | null) => void) | null = null;
  private closed = false;
  private rl: readline.Interface | null = null;

  constructor(private readonly io: Io) {}

  private start() {
    if (this.rl) return;
    this.rl = readline.createInterface({ input: this.io.stdin, terminal: false });
    this.rl.on("line", (line) => {
      if (this.waiting) {
        const w = this.waiting;
        this.waiting = null;
        w(line);
      } else this.lines.push(line);
    });
    this.rl.on("close", () => {
      this.closed = true;
      this.waiting?.(null);
      this.waiting = null;
    });
  }

  async ask(question: string): Promise<string> {
    this.io.stderr.write(question);
    this.start();
    const line = this.lines.length ? this.lines.shift()! : this.closed ? null : await new Promise<string | null>((r) => (this.waiting = r));
    if (line === null) throw new CliError(EXIT.usage, "No answer: stdin ended before the question was answered. Pass the answer as an option instead (see --help).");
    return line.trim();
  }

  /** A secret typed on a terminal without echo; from a pipe, one line. */
  async askHidden(question: string): Promise<string> {
    const { stdin } = this.io;
    if (!stdin.isTTY || !stdin.setRawMode) return this.ask(question);
    this.io.stderr.write(question);
    stdin.setRawMode(true);
    stdin.resume();
    try {
      return await new Promise<string>((resolve, reject) => {
        let value = "";
        const onData = (chunk: Buffer | string) => {
          for (const ch of chunk.toString("utf8")) {
            if (ch === "\r" || ch === "\n") {
              stdin.off("data", onData);
              this.io.stderr.write("\n");
              return resolve(value.trim());
            }
            if (ch === "\u0003") {
              stdin.off("data", onData);
              return reject(new CliError(EXIT.usage, "Interrupted."));
            }
            if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
            else value += ch;
          }
        };
        stdin.on("data", onData);
      });
    } finally {
      stdin.setRawMode(false);
      stdin.pause();
    }
  }

  close() {
    this.rl?.close();
  }
}
