import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { editorCommand } from "../config";
import type { Ctx } from "../context";
import { CLI, CliError, EXIT } from "../errors";
import type { Answer, Clarification, Gate, Run, RunDetail } from "../types";

const runPath = (id: string) => `/api/runs/${encodeURIComponent(id)}`;

export async function approve(ctx: Ctx, id: string, opts: { gate?: string; notes?: string }) {
  const body = await ctx.api().post<{ gate: Gate }>(`${runPath(id)}/approve`, { gateId: opts.gate, notes: opts.notes });
  ctx.result(body);
  ctx.say(`Approved ${body.gate.kind} gate #${body.gate.gateNumber} of ${id}; the run goes on.`);
}

export async function reject(ctx: Ctx, id: string, opts: { gate?: string; feedback: string }) {
  if (!opts.feedback?.trim()) throw new CliError(EXIT.usage, '--feedback: say what the planner should change, e.g. --feedback "Keep the API unchanged".');
  const body = await ctx.api().post<{ gate: Gate }>(`${runPath(id)}/reject`, { gateId: opts.gate, feedback: opts.feedback });
  ctx.result(body);
  ctx.say(`Rejected ${body.gate.kind} gate #${body.gate.gateNumber} of ${id}; the planner plans again with your feedback.`);
}

export const FIX_DECISIONS = ["retry", "accept", "replan", "cancel"] as const;

export async function fix(ctx: Ctx, id: string, decision: string, opts: { notes?: string }) {
  if (!(FIX_DECISIONS as readonly string[]).includes(decision)) {
    throw new CliError(EXIT.usage, `"${decision}" is not a fix decision; use retry, accept, replan or cancel.`);
  }
  const body = await ctx.api().post<{ gate: Gate }>(`${runPath(id)}/fix-decision`, { decision, notes: opts.notes });
  ctx.result(body);
  const what = { retry: "implementation tries again with the findings", accept: "the work is delivered as it is", replan: "the run goes back to planning", cancel: "the run is cancelled" }[decision as (typeof FIX_DECISIONS)[number]];
  ctx.say(`Decided ${decision} on ${id}: ${what}.`);
}

/** The run's pending gate that carries a plan (the plan gate, or an escalation with one). */
function pendingPlanGate(detail: RunDetail): Gate {
  const gate = detail.gates.find((g) => g.status === "pending" && g.context?.plan?.mermaid);
  if (!gate) {
    throw new CliError(EXIT.conflict, `${detail.run.id} has no plan waiting for approval (it is ${detail.run.status}); nothing to edit.`);
  }
  return gate;
}

type Validation = { valid: true } | { valid: false; error: { message: string; line: number | null } };

/** Open $EDITOR (or take --file) on the plan's Mermaid, check it with the server's Mermaid grammar, then approve it. */
export async function edit(ctx: Ctx, id: string, opts: { file?: string; notes?: string }) {
  const detail = await ctx.api().get<RunDetail>(runPath(id));
  const gate = pendingPlanGate(detail);
  const plan = gate.context!.plan!;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-plan-"));
  const file = path.join(dir, `${id}-plan-v${gate.context?.version ?? 1}.mmd`);
  fs.writeFileSync(file, opts.file ? readPlanFile(opts.file) : plan.mermaid.endsWith("\n") ? plan.mermaid : `${plan.mermaid}\n`);
  for (;;) {
    if (!opts.file) openEditor(ctx, file);
    const source = fs.readFileSync(file, "utf8");
    if (source.trim() === plan.mermaid.trim()) {
      ctx.result({ changed: false });
      ctx.say(`The plan is unchanged; nothing was sent. Approve it as it is with: ${CLI} approve ${id}`);
      fs.rmSync(dir, { recursive: true, force: true });
      return;
    }
    const check = await ctx.api().post<Validation>("/api/mermaid/validate", { source });
    if (check.valid) {
      const body = await ctx.api().post<{ gate: Gate }>(`${runPath(id)}/approve`, {
        gateId: gate.id,
        notes: opts.notes,
        editedPlan: { mermaid: source, tasks: plan.tasks, summary: plan.summary },
      });
      fs.rmSync(dir, { recursive: true, force: true });
      ctx.result(body);
      ctx.say(`Approved ${id} with your edited plan (a new spec version).`);
      return;
    }
    const where = check.error.line ? ` on line ${check.error.line}` : "";
    // The server's message already names the line ("Invalid Mermaid on line N: …").
    ctx.tell(`The edited plan was refused by the server's Mermaid check:\n${check.error.message}\n`);
    if (opts.file || !ctx.io.stdin.isTTY || !/^(y|yes|)$/i.test(await ctx.prompter.ask("Edit again? [Y/n] "))) {
      throw new CliError(EXIT.usage, `The plan was not sent: fix the Mermaid${where}. Your edit is kept in ${file}; retry with ${CLI} edit ${id} --file ${file}`);
    }
  }
}

function readPlanFile(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (error) {
    throw new CliError(EXIT.usage, `--file: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)}).`);
  }
}

function openEditor(ctx: Ctx, file: string) {
  const editor = editorCommand({ env: ctx.env });
  // Through sh, so an editor with arguments ("code --wait") works; the file is passed as "$1", never spliced in.
  const result = spawnSync("sh", ["-c", `${editor} "$1"`, "sh", file], { stdio: "inherit", env: ctx.env as NodeJS.ProcessEnv });
  if (result.error || result.status !== 0) {
    throw new CliError(EXIT.usage, `The editor (${editor}) exited with ${result.error?.message ?? `status ${result.status}`}; set $EDITOR to one that works. Nothing was sent.`);
  }
}

// ---------------------------------------------------------------------------------------------------------------------

/** The pending question named by its id, or a run's pending question when given a run id. */
async function findClarification(ctx: Ctx, id: string): Promise<Clarification | null> {
  if (id.startsWith("run_")) {
    const detail = await ctx.api().get<RunDetail>(runPath(id));
    const pending = detail.clarifications.find((c) => c.status === "pending");
    if (!pending) throw new CliError(EXIT.conflict, `${id} has no open question (it is ${detail.run.status}).`);
    return pending;
  }
  const { runs } = await ctx.api().get<{ runs: Run[] }>("/api/runs?status=awaiting_clarification&limit=200");
  for (const r of runs) {
    if (r.pendingClarification?.clarificationId !== id) continue;
    const detail = await ctx.api().get<RunDetail>(runPath(r.id));
    return detail.clarifications.find((c) => c.id === id) ?? null;
  }
  return null;
}

const MAX_FILE_BYTES = 256 * 1024;

export function fileAnswer(file: string): Answer {
  let content: Buffer;
  try {
    content = fs.readFileSync(file);
  } catch (error) {
    throw new CliError(EXIT.usage, `Cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)}); give the path of the file to upload.`);
  }
  if (content.length > MAX_FILE_BYTES) throw new CliError(EXIT.usage, `${file} is ${content.length} bytes; a file answer may be at most ${MAX_FILE_BYTES} bytes.`);
  return { fileName: path.basename(file), contentBase64: content.toString("base64") };
}

/** Ask for an answer of the question's type: free text, one option, several options, or a file path. */
async function promptAnswer(ctx: Ctx, c: Clarification): Promise<Answer> {
  const err = { write: (text: string) => ctx.tell(text) };
  err.write(`${c.stage} asks: ${c.question}\n`);
  if (c.context) err.write(`${c.context}\n`);
  const options = c.options ?? [];
  options.forEach((o, i) => err.write(`  ${i + 1}) ${o}\n`));
  for (let attempt = 0; attempt < 3; attempt++) {
    switch (c.responseType) {
      case "text": {
        const text = await ctx.prompter.ask("Your answer: ");
        if (text) return text;
        err.write("The answer must not be empty.\n");
        break;
      }
      case "single_choice": {
        const picked = pick(options, await ctx.prompter.ask(`Choose one (1-${options.length}): `));
        if (picked.length === 1) return picked[0]!;
        err.write(`Type one number from 1 to ${options.length}, or the option's text.\n`);
        break;
      }
      case "multiple_choice": {
        const picked = pick(options, await ctx.prompter.ask("Choose any (numbers separated by commas, e.g. 1,3): "));
        if (picked.length > 0) return picked;
        err.write(`Type numbers from 1 to ${options.length} separated by commas.\n`);
        break;
      }
      case "file": {
        const file = await ctx.prompter.ask("Path of the file to upload: ");
        if (file) return fileAnswer(file);
        break;
      }
    }
  }
  throw new CliError(EXIT.usage, "No valid answer after three tries; nothing was sent.");
}

/** "1,3" or "French" → the options meant; [] when any part names no option. */
function pick(options: string[], input: string): string[] {
  const parts = input.split(",").map((s) => s.trim()).filter(Boolean);
  const out: string[] = [];
  for (const part of parts) {
    const n = Number(part);
    const option = Number.isInteger(n) && n >= 1 && n <= options.length ? options[n - 1] : options.find((o) => o.toLowerCase() === part.toLowerCase());
    if (option === undefined) return [];
    if (!out.includes(option)) out.push(option);
  }
  return out;
}

export async function answer(ctx: Ctx, id: string, opts: { text?: string; choice?: string[]; file?: string }) {
  const given = [opts.text !== undefined, opts.choice !== undefined, opts.file !== undefined].filter(Boolean).length;
  if (given > 1) throw new CliError(EXIT.usage, "Give one of --text, --choice or --file.");
  const clarification = await findClarification(ctx, id);
  let response: Answer;
  if (opts.text !== undefined) response = opts.text;
  else if (opts.file !== undefined) response = fileAnswer(opts.file);
  else if (opts.choice !== undefined) {
    response = clarification?.responseType === "multiple_choice" || (!clarification && opts.choice.length > 1) ? opts.choice : opts.choice[0]!;
  } else if (clarification) response = await promptAnswer(ctx, clarification);
  else throw new CliError(EXIT.notFound, `No open question ${id} among your runs. List waiting runs with: ${CLI} runs --status awaiting_clarification`);
  const target = clarification?.id ?? id;
  const body = await ctx.api().post<{ clarification: Clarification }>(`/api/clarifications/${encodeURIComponent(target)}/answer`, { response });
  ctx.result(body);
  ctx.say(`Answered ${target}; ${body.clarification.workflowRunId} goes on.`);
}
