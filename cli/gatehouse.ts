import { createRequire } from "node:module";
import { Argument, Command, CommanderError, Option } from "commander";
import { processEnv, type CliEnv } from "./config";
import { Ctx } from "./context";
import { CLI, CliError, EXIT, type ExitCode } from "./errors";
import { printable } from "./format";
import type { Io } from "./prompt";
import { login } from "./commands/login";
import { cancel, diff, logs, parseApproaches, parseStatuses, projects, retry, run, runs, show } from "./commands/runs";
import { answer, approve, edit, fix, reject } from "./commands/decide";
import { watch } from "./commands/watch";

const { version } = createRequire(import.meta.url)("../package.json") as { version: string };

const positiveInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new CliError(EXIT.usage, `${name}: "${value}" is not a whole number.`);
  return n;
};

/** Build the program; each action stores its exit code in `result.code`. */
function program(io: Io, env: CliEnv, result: { code: ExitCode; ctx: Ctx | null }) {
  const cli = new Command(CLI)
    .description("Drive Gatehouse runs from a terminal, through the server's HTTP API.")
    .version(version)
    .option("--json", "print JSON for scripts (the API's own shapes; watch prints one JSON object per line)")
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .showHelpAfterError("(run with --help for usage)")
    .addHelpText("after", "\nExit codes: 0 ok · 1 run failed/cancelled · 2 usage · 3 auth · 4 not found · 5 conflict · 6 server · 10 waiting (watch --stop-when-waiting)");

  /** Wrap an action: a context from the global options, and the code it returns (0 when nothing). */
  const act =
    <A extends unknown[]>(fn: (ctx: Ctx, ...args: A) => Promise<unknown>) =>
    async (...args: unknown[]) => {
      const command = args.at(-1) as Command;
      const ctx = new Ctx(io, env, Boolean(command.optsWithGlobals().json));
      result.ctx = ctx;
      const code = await fn(ctx, ...(args.slice(0, -1) as A));
      result.code = typeof code === "number" ? (code as ExitCode) : EXIT.ok;
    };

  cli
    .command("login")
    .description("store a server URL and API token (in $XDG_CONFIG_HOME/gatehouse/config.json, mode 600)")
    .option("--url <url>", "server URL, e.g. http://127.0.0.1:3000")
    .option("--token <token>", "API token (prompted without echo when left out)")
    .action(act((ctx, opts: { url?: string; token?: string }) => login(ctx, opts)));

  cli.command("projects").description("list your projects").action(act((ctx) => projects(ctx)));

  cli
    .command("run")
    .description("start a run")
    .argument("<request>", "what to do, in words (demo-model markers work too)")
    .option("-p, --project <id|name>", "project (default: your only project)")
    .option("-c, --config <file>", "run config as a JSON file (trustMode, git, limits …)")
    .option("-n, --approaches <n>", "start the request N times side by side (1-5)", parseApproaches)
    .option("-w, --watch", "follow the run after starting it (like `npx gatehouse watch`)")
    .action(
      act(async (ctx, request: string, opts: { project?: string; config?: string; approaches?: number; watch?: boolean }) => {
        const started = await run(ctx, request, opts);
        return opts.watch ? watch(ctx, started[0]!.id, {}) : EXIT.ok;
      }),
    );

  cli
    .command("runs")
    .description("list runs, newest first")
    .option("-s, --status <list>", "comma-separated statuses, e.g. awaiting_approval,awaiting_clarification", parseStatuses)
    .option("-p, --project <id|name>", "only this project")
    .option("--limit <n>", "at most n runs (1-200)", positiveInt("--limit"))
    .action(act((ctx, opts: { status?: string; project?: string; limit?: number }) => runs(ctx, opts)));

  cli.command("show").description("a run's state, cost and what it waits for").argument("<run>").action(act((ctx, id: string) => show(ctx, id)));

  cli
    .command("watch")
    .description("follow a run live (SSE); exits 0 when it completes, 1 when it fails or is cancelled")
    .argument("<run>")
    .option("--stop-when-waiting", "exit with 10 as soon as the run waits for a person")
    .action(act((ctx, id: string, opts: { stopWhenWaiting?: boolean }) => watch(ctx, id, opts)));

  cli
    .command("approve")
    .description("approve the run's pending gate")
    .argument("<run>")
    .option("--gate <id>", "a specific gate (default: the pending one)")
    .option("--notes <text>", "notes kept with the decision")
    .action(act((ctx, id: string, opts: { gate?: string; notes?: string }) => approve(ctx, id, opts)));

  cli
    .command("reject")
    .description("reject the pending plan; the planner plans again with your feedback")
    .argument("<run>")
    .requiredOption("--feedback <text>", "what to change")
    .option("--gate <id>", "a specific gate (default: the pending one)")
    .action(act((ctx, id: string, opts: { gate?: string; feedback: string }) => reject(ctx, id, opts)));

  cli
    .command("edit")
    .description("open $EDITOR on the pending plan's Mermaid, validate it, and approve the edited plan")
    .argument("<run>")
    .option("--file <path>", "take the edited Mermaid from a file instead of opening the editor")
    .option("--notes <text>", "notes kept with the decision")
    .action(act((ctx, id: string, opts: { file?: string; notes?: string }) => edit(ctx, id, opts)));

  cli
    .command("answer")
    .description("answer a clarification (prompts by its type: text, one option, several, a file path)")
    .argument("<clarification>", "the question's id (clr_…), or a run id for its open question")
    .option("--text <answer>", "a text answer")
    .option("--choice <option>", "an option, by its text (repeat for a multiple choice)", (v: string, prev: string[] = []) => [...prev, v])
    .option("--file <path>", "a file to upload (at most 256 KiB)")
    .action(act((ctx, id: string, opts: { text?: string; choice?: string[]; file?: string }) => answer(ctx, id, opts)));

  cli
    .command("fix")
    .description("decide after a failed validation (retry | accept | cancel) or a stopped implementer (retry | replan | cancel)")
    .argument("<run>")
    .addArgument(new Argument("<decision>", "retry | accept | replan | cancel").choices(["retry", "accept", "replan", "cancel"]))
    .option("--notes <text>", "notes kept with the decision")
    .action(act((ctx, id: string, decision: string, opts: { notes?: string }) => fix(ctx, id, decision, opts)));

  cli
    .command("cancel")
    .description("cancel a run at any moment (its branch is kept)")
    .argument("<run>")
    .option("--reason <text>", "why")
    .action(act((ctx, id: string, opts: { reason?: string }) => cancel(ctx, id, opts)));

  cli.command("retry").description("resume a paused run").argument("<run>").action(act((ctx, id: string) => retry(ctx, id)));

  cli.command("diff").description("the run branch's changes against its base").argument("<run>").action(act((ctx, id: string) => diff(ctx, id)));

  cli
    .command("logs")
    .description("the run's whole event log")
    .argument("<run>")
    .addOption(new Option("--after <seq>", "only events after this sequence number").argParser(positiveInt("--after")))
    .action(act((ctx, id: string, opts: { after?: number }) => logs(ctx, id, opts)));

  return cli;
}

/** Run the CLI with these arguments and streams; resolves with the exit code (documented in README.md). */
export async function main({
  argv,
  env = processEnv(),
  io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr },
}: {
  argv: string[];
  env?: CliEnv;
  io?: Io;
}): Promise<number> {
  const result: { code: ExitCode; ctx: Ctx | null } = { code: EXIT.ok, ctx: null };
  const json = argv.includes("--json");
  const closed = outputClosed(io);
  const command = program(io, env, result)
    .parseAsync(argv, { from: "user" })
    .then(() => result.code);
  try {
    const code = await Promise.race([command, closed]);
    // The reader went away mid-command: what the command still does can no longer be shown or fail visibly.
    command.catch(() => {});
    return code;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const cliError =
      error instanceof CliError ? error : new CliError(EXIT.server, `Unexpected error: ${error instanceof Error ? error.message : String(error)}`);
    if (json) io.stderr.write(`${JSON.stringify({ error: { code: cliError.code ?? null, message: cliError.message, exitCode: cliError.exitCode } })}\n`);
    else io.stderr.write(`gatehouse: ${printable(cliError.message)}\n`);
    return cliError.exitCode;
  } finally {
    result.ctx?.prompter.close();
  }
}

/**
 * Resolves with 0 when the reader of our output goes away (EPIPE: `gatehouse logs … | head` after head has its lines),
 * quietly, as Unix tools do; any other write error on stdout or stderr ends the command as a failure. The listeners stay:
 * a write after the end must not become an unhandled 'error' that crashes the process.
 */
function outputClosed(io: Io): Promise<ExitCode> {
  return new Promise((resolve) => {
    for (const stream of [io.stdout, io.stderr]) {
      stream.on("error", (error: NodeJS.ErrnoException) => resolve(error.code === "EPIPE" ? EXIT.ok : EXIT.server));
    }
  });
}
