import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PassThrough, Writable } from "node:stream";
import { main } from "@/cli/gatehouse";

export type CliResult = { code: number; stdout: string; stderr: string };

function sink() {
  let text = "";
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

/** A fresh user config dir (HOME and XDG_CONFIG_HOME), so no test sees another's login. */
export function freshHome(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-cli-home-"));
}

/**
 * Run the CLI in-process with its own streams and environment (nothing of the test's process.env leaks in), lines of
 * `input` on stdin; `tty` makes stdout look like a terminal. The CLI still talks to the server only over HTTP.
 */
export async function cli(args: string[], { env, input, tty = false }: { env: Record<string, string>; input?: string; tty?: boolean }): Promise<CliResult> {
  const stdout = sink();
  // A terminal as far as the CLI can tell (its progress line is drawn only on one).
  if (tty) Object.assign(stdout.stream, { isTTY: true });
  const stderr = sink();
  const stdin = new PassThrough();
  if (input !== undefined) stdin.end(input);
  const code = await main({ argv: args, env: { PATH: process.env.PATH, ...env }, io: { stdin, stdout: stdout.stream, stderr: stderr.stream } });
  if (input === undefined) stdin.end();
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** A terminal session as text: each command with its output, for the release note. */
export class Transcript {
  private parts: string[] = [];

  add(args: string[], result: CliResult, input?: string) {
    const quoted = args.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(" ");
    this.parts.push(`$ gatehouse ${quoted}${input ? `   # typed: ${input.trim()}` : ""}`);
    // Prompts and errors go to stderr; show them in the order a terminal would (stderr prompts come first).
    if (result.stderr) this.parts.push(result.stderr.trimEnd());
    if (result.stdout) this.parts.push(result.stdout.trimEnd());
    if (result.code !== 0) this.parts.push(`[exit ${result.code}]`);
  }

  toString() {
    return `${this.parts.join("\n")}\n`;
  }
}
