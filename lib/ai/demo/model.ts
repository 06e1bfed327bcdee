import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Prompt } from "@ai-sdk/provider";
import { readSection } from "../prompt-sections";
import { createScriptedModel, instructionText, type ScriptedReply } from "../scripted-model";
import { singleLine } from "@/lib/plain-text";
import { commandArgv } from "@/lib/sandbox/command-line";
import { parseInstructions, type DemoInstructions } from "./instructions";

/**
 * `demo:*` — the embedded default model. It never pretends to be intelligent: it follows the instructions written into
 * the request (see ./instructions.ts) and otherwise plans one task and writes a note file, so runs are deterministic and
 * offline while still driving the real agent loops (tool calls, structured output, usage).
 */
export function createDemoModel(name = "default"): LanguageModelV3 {
  return createScriptedModel({ provider: "demo", modelId: name, respond: demoRespond });
}

export const DEMO_LABEL = "demo";

function demoRespond(options: LanguageModelV3CallOptions): ScriptedReply {
  const text = instructionText(options.prompt);
  const ins = parseInstructions(readSection(text, "request") ?? "");
  const tools = (options.tools ?? []).map((t) => t.name);
  if (tools.includes("write_file")) return implementerReply(ins, options.prompt, text);
  const schema = options.responseFormat?.type === "json" ? options.responseFormat.schema : undefined;
  const props = Object.keys((schema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {});
  if (props.includes("mermaid") && props.includes("answer")) return { text: JSON.stringify(planAnswerReply(ins, text)) };
  if (props.includes("mermaid")) return { text: JSON.stringify(planReply(ins, text)) };
  if (props.includes("findings")) return { text: JSON.stringify(reviewReply(ins, text)) };
  if (props.includes("alignmentScore")) return { text: JSON.stringify(alignmentReply(ins, text)) };
  if (props.includes("category")) return { text: JSON.stringify(debugReply(ins, text)) };
  return { text: `Demo model (scripted, not AI). Request: ${ins.title}` };
}

// ── planner ───────────────────────────────────────────────────────────────────────────────────────────────────────

/** A path as one word of a command line: quoted, so a file name never becomes shell syntax. */
function shellWord(text: string): string {
  return /^[A-Za-z0-9._/-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

function label(text: string): string {
  return `"${text.replace(/"/g, "'")}"`;
}

/** A person's words in a diagram label: one line, cut at a word boundary. */
function shortLine(text: string, max = 80): string {
  const line = singleLine(text);
  if (line.length <= max) return line;
  const head = line.slice(0, max - 1);
  const space = head.lastIndexOf(" ");
  return `${space > max / 2 ? head.slice(0, space) : head}…`;
}

/** The planning answers the planner was given (<clarifications>: "Q: …" / "A: …" blocks), in order. */
function planningAnswers(prompt: string): Array<{ question: string; answer: string }> {
  return (readSection(prompt, "clarifications") ?? "")
    .split(/\n\n(?=Q: )/)
    .map((block) => /^Q: ([\s\S]*?)\nA: ([\s\S]*)$/.exec(block.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ question: singleLine(m[1]!), answer: singleLine(m[2]!) }));
}

/** The newest feedback a person rejected a plan with (<rejection-feedback>, numbered oldest first); re-plan proposals are not. */
function latestFeedback(prompt: string): string | null {
  const items = (readSection(prompt, "rejection-feedback") ?? "")
    .split(/^\d+\. /m)
    .map((f) => singleLine(f))
    .filter((f) => f && !/^Re-plan proposed by /.test(f));
  return items.at(-1) ?? null;
}

function planReply(ins: DemoInstructions, prompt: string) {
  const answered = readSection(prompt, "clarifications") ?? "";
  const open = ins.planAsks.find((q) => !answered.includes(q));
  const none = { summary: "", mermaid: "", tasks: [], acceptanceCriteria: [], risks: [] };
  if (open) {
    return {
      kind: "clarification",
      clarification: { question: open, context: "Asked by the demo model ([plan-ask] in the request).", options: [], responseType: "text" },
      ...none,
    };
  }
  // "Approach N" (New run → explore approaches): even approaches write the note first, so approaches differ visibly.
  const approach = Number(/^Approach (\d+)\b/m.exec(ins.description)?.[1] ?? 0);
  const noteFirst = approach > 0 && approach % 2 === 0;
  const fileTasks = ins.files.map((f) => ({
    title: `Write ${f.path}`,
    description: `Create ${f.path} with the content given in the request.`,
    files: [f.path],
  }));
  // What a person told the planner — the planning answers and the newest rejection feedback — shows in the plan: lines
  // of the note task and nodes of the diagram, so a re-plan after a rejection differs visibly from the rejected one.
  const answers = planningAnswers(prompt);
  const feedback = latestFeedback(prompt);
  const heard = [...answers.map((a) => `Planning answer: ${a.question} — ${a.answer}`), ...(feedback ? [`Feedback: ${feedback}`] : [])];
  const noteTask = {
    title: "Write the request note",
    description: [`Describe the request in ${ins.notePath}.`, ...heard].join("\n"),
    files: [ins.notePath],
  };
  const ordered = noteFirst ? [noteTask, ...fileTasks] : [...fileTasks, noteTask];
  // A re-plan the implementer proposed ([replan:]): the new plan has a task to handle the observation.
  if (ins.replan && (readSection(prompt, "rejection-feedback") ?? "").includes("Re-plan proposed by the implementer")) {
    ordered.push({ title: "Handle what the implementer observed", description: ins.replan, files: [] });
  }
  // [scope:] widens the plan's scope: the last task may also change (and delete inside) these paths. A ```fix: file
  // the fix pass writes is in the scope too.
  const fixPaths = ins.fixes.map((f) => f.path).filter((p) => !ordered.some((t) => t.files.includes(p)));
  if (ins.scope.length || fixPaths.length) ordered[ordered.length - 1] = { ...ordered.at(-1)!, files: [...ordered.at(-1)!.files, ...ins.scope, ...fixPaths] };
  const tasks = ordered.map((t, i) => ({
    id: `T${i + 1}`,
    ...t,
    // [verify:] the last task's own checks (per-task verification).
    checks: i === ordered.length - 1 ? ins.verifies : [],
    dependsOn: noteFirst ? (i === 0 ? [] : ["T1"]) : i === ordered.length - 1 ? ordered.slice(0, -1).map((_, j) => `T${j + 1}`) : [],
  }));
  const replanTask = tasks.find((t) => t.title === "Handle what the implementer observed");
  if (replanTask) Object.assign(replanTask, { id: "R1", dependsOn: [] });
  const noteId = tasks.find((t) => t.title === noteTask.title)!.id;
  const headline = ins.description.split("\n").find((l) => l.trim())?.replace(/^#+\s*/, "").trim() || ins.title;
  const diagramsSoFar = Number(readSection(prompt, "diagram-attempt") ?? "0") || 0;
  const mermaid =
    diagramsSoFar < ins.invalidMermaid
      ? `flowchart TD\n  A[${ins.title}] --> B{{{ invalid on purpose ([invalid-mermaid: ${ins.invalidMermaid}])`
      : [
          "flowchart TD",
          `  R[${label(approach ? `${ins.title} (approach ${approach})` : ins.title)}]`,
          ...tasks.map((t) => `  ${t.id}[${label(t.title)}]`),
          ...tasks.map((t) => (t.dependsOn.length ? t.dependsOn.map((d) => `  ${d} --> ${t.id}`).join("\n") : `  R --> ${t.id}`)),
          ...answers.map((a, i) => `  A${i + 1}[${label(`Answer: ${shortLine(a.answer)}`)}] --> ${noteId}`),
          ...(feedback ? [`  F[${label(`Feedback: ${shortLine(feedback)}`)}] --> ${noteId}`] : []),
        ].join("\n");
  return {
    kind: "plan",
    clarification: null,
    summary: `Demo plan (scripted${approach ? `, approach ${approach}` : ""}${noteFirst ? ", request note first" : ""}${feedback ? ", revised for your feedback" : ""}): ${headline}`,
    mermaid,
    tasks,
    acceptanceCriteria: [
      ...ins.files.map((f, i) => ({ id: `AC${i + 1}`, description: `${f.path} exists`, command: `test -f ${shellWord(f.path)}` })),
      {
        id: `AC${ins.files.length + 1}`,
        description: `${ins.notePath} describes the request`,
        command: `test -f ${shellWord(ins.notePath)}`,
      },
      ...ins.checks.map((command, i) => ({ id: `AC${ins.files.length + 2 + i}`, description: `\`${command}\` succeeds`, command })),
    ],
    risks: ["Demo model: the plan follows the request's instructions literally."],
  };
}

/**
 * "Ask back" on the plan gate: the demo answers deterministically (it repeats the question and says what it changed)
 * and revises its plan visibly: the question joins the plan's risks, so the new version differs from the last.
 */
function planAnswerReply(ins: DemoInstructions, prompt: string) {
  const question = (readSection(prompt, "plan-question") ?? "").trim();
  const plan = planReply(ins, prompt);
  if (plan.kind !== "plan") return { ...plan, answer: "I need an answer to my own question first." };
  return {
    ...plan,
    summary: `${plan.summary} (revised after a question)`,
    risks: [...plan.risks, `Asked on the plan card: ${question}`],
    answer: `Demo answer (scripted, not AI): you asked "${question}". The plan follows the request's instructions literally; the revised plan lists your question under its risks.`,
  };
}

// ── implementer ───────────────────────────────────────────────────────────────────────────────────────────────────

type Call = { toolName: string; input: unknown };

function clarificationAnswers(prompt: LanguageModelV3Prompt): Array<{ question: string; answer: string }> {
  const out: Array<{ question: string; answer: string }> = [];
  for (const message of prompt) {
    if (message.role !== "tool") continue;
    for (const part of message.content) {
      if (part.type !== "tool-result" || part.toolName !== "request_clarification") continue;
      const value = part.output.type === "json" ? (part.output.value as { question?: string; answer?: unknown }) : undefined;
      if (value) out.push({ question: String(value.question ?? ""), answer: String(value.answer ?? "") });
    }
  }
  return out;
}

const FILE_ANSWER = /^File ([^\n]*):\n([\s\S]*)$/;
const FILE_LINES = 10;

function noteContent(ins: DemoInstructions, answers: Array<{ question: string; answer: string }>): string {
  const lines = [`# ${ins.title}`, "", ins.description, ""];
  if (ins.files.length) lines.push("## Files", "", ...ins.files.map((f) => `- \`${f.path}\``), "");
  if (answers.length) {
    lines.push("## Clarifications", "");
    for (const a of answers) {
      const asked = ins.asks.find((q) => q.question === a.question);
      const file = asked?.responseType === "file" ? FILE_ANSWER.exec(a.answer) : null;
      if (!file) {
        lines.push(`- **${a.question}** — ${a.answer}`);
        continue;
      }
      // A file reaches the agent as "File <name>:\n<content>"; the note keeps its name and first lines.
      const content = file[2]!.replace(/\n+$/, "").split("\n");
      lines.push(`- **${a.question}** — file \`${file[1]}\`${content.length > FILE_LINES ? ` (first ${FILE_LINES} of ${content.length} lines)` : ""}:`, "");
      lines.push(...content.slice(0, FILE_LINES).map((l) => `  > ${l}`.trimEnd()));
      lines.push("");
    }
    if (lines.at(-1) !== "") lines.push("");
  }
  lines.push("_Written by the Gatehouse demo model (scripted, not AI)._", "");
  return lines.join("\n");
}

/** The newest tool call whose result said it needs a person's approval (lib/agents/tools.ts), to repeat it. */
function heldCall(prompt: LanguageModelV3Prompt): Call | null {
  const heldIds = new Set<string>();
  for (const m of prompt) {
    if (m.role !== "tool") continue;
    for (const part of m.content) {
      if (part.type !== "tool-result") continue;
      const out = part.output as { type: string; value?: unknown };
      if (typeof out.value === "string" && out.value.startsWith("Needs a person's approval first")) heldIds.add(part.toolCallId);
    }
  }
  for (const m of [...prompt].reverse()) {
    if (m.role !== "assistant") continue;
    for (const part of m.content) {
      if (part.type === "tool-call" && heldIds.has(part.toolCallId)) {
        const input = typeof part.input === "string" ? JSON.parse(part.input) : part.input;
        return { toolName: part.toolName, input: input as Record<string, unknown> };
      }
    }
  }
  return null;
}

/** Where the conversation is in the fix passes: the turns they took so far, and the next one's calls while one is on. */
function fixPass(ins: DemoInstructions, prompt: LanguageModelV3Prompt): { turns: number; next: Call[] | null } {
  let turns = 0;
  let current: { taskId: string; turns: number } | null = null;
  for (const m of prompt) {
    if (m.role === "user") {
      const text = m.content.map((p) => (p.type === "text" ? p.text : "")).join("\n");
      const reopened = /<verify-failure>\s*Task (\S+)'s own acceptance command failed/.exec(text);
      if (reopened) current = { taskId: reopened[1]!, turns: 0 };
    } else if (m.role === "assistant" && current && current.turns < 2 && m.content.some((p) => p.type === "tool-call")) {
      current.turns += 1;
      turns += 1;
    }
  }
  if (!current || current.turns >= 2) return { turns, next: null };
  if (current.turns === 0) {
    return {
      turns,
      next: [{ toolName: "update_todo", input: { id: current.taskId, status: "in_progress" } }, ...ins.fixes.map((f) => ({ toolName: "write_file", input: f }))],
    };
  }
  const wrote = ins.fixes.map((f) => f.path);
  return {
    turns,
    next: [
      { toolName: "record_progress", input: { taskId: current.taskId, progress: 1, changed: wrote.length ? `Fixed ${wrote.join(", ")}.` : "Nothing to fix." } },
      { toolName: "update_todo", input: { id: current.taskId, status: "done" } },
    ],
  };
}

/** A tasks.md pasted into the request (```tasks.md fence): its tasks' [run:] markers are theirs, not the request's. */
const PASTED_TASKS = /^(`{3,}|~{3,})[ \t]*tasks\.md[ \t]*\n[\s\S]*?^\1[ \t]*$/m;

type DemoTodo = { id: string; title?: string; files?: string[]; description?: string };

function implementerReply(ins: DemoInstructions, prompt: LanguageModelV3Prompt, text: string): ScriptedReply {
  // [loop:]: the first session repeats one read, as a stuck model does, until the session is stopped; one started with
  // feedback (a person's retry or re-plan at the gate about the stopped implementer) works normally.
  if (ins.loop && readSection(text, "validation-feedback") === undefined) return { toolCalls: [{ toolName: "read_file", input: { path: "README.md" } }] };
  let todos: DemoTodo[] = [];
  try {
    todos = JSON.parse(readSection(text, "todos") ?? "[]");
  } catch {
    todos = [];
  }
  const request = readSection(text, "request") ?? "";
  const tasksRun = PASTED_TASKS.test(request);
  // A parallel task's session (<parallel-task>) does its own todo only: files no todo of its names are another
  // task's, and the request's own [run:] commands and questions belong to the plan's last task.
  const parallel = readSection(text, "parallel-task") !== null;
  const planTasks = (readSection(text, "plan") ?? "").split("\nAcceptance criteria:")[0]!;
  const planTaskIds = [...planTasks.matchAll(/^- (\S+?): /gm)].map((m) => m[1]!);
  const holdsLast = !parallel || todos.some((t) => t.id === planTaskIds.at(-1));
  const requestRuns = tasksRun ? parseInstructions(request.replace(PASTED_TASKS, "")).runs : ins.runs;
  const answers = clarificationAnswers(prompt);
  const writes: Array<{ path: string; content: string }> = [
    ...ins.files,
    { path: ins.notePath, content: noteContent(ins, answers) },
  ];
  // A tasks.md task's `Files:` without a file block in the request: a line naming the task.
  if (tasksRun) {
    for (const todo of todos) {
      for (const file of todo.files ?? []) {
        if (!file.endsWith("/") && !writes.some((w) => w.path === file)) writes.push({ path: file, content: `${todo.id}: ${todo.title ?? todo.id}\n` });
      }
    }
  }
  // In a tasks.md run the request note is written only by a task that names it (it is in no other task's scope).
  const owner = (path: string) =>
    todos.find((t) => t.files?.includes(path)) ?? (holdsLast && !(tasksRun && path === ins.notePath) ? todos[todos.length - 1] : undefined);

  // The request's questions are asked once per run: in parallel sessions, by the plan's last task's.
  const turns: Call[][] = (holdsLast ? ins.asks : []).map((a) => {
    const marker = a.responseType === "multiple_choice" ? "ask-multi" : a.responseType === "file" ? "ask-file" : "ask";
    const input: Record<string, unknown> = { question: a.question, options: a.options, context: `Asked by the demo model ([${marker}] in the request).` };
    // [ask:] relies on the tool's default (single choice with options, text without); the others say what they want.
    if (marker !== "ask") input.responseType = a.responseType;
    return [{ toolName: "request_clarification", input }];
  });
  // [run:] commands: one turn each, after the files are written, exactly as a model would call run_command.
  const runTurns = (lines: string[]): Call[][] => lines.map((line) => [{ toolName: "run_command", input: commandArgv(line) }]);
  // [mcp:] calls: one turn each, after the request's commands, under the tool name the implementer gives MCP tools.
  const mcpTurns: Call[][] = ins.mcps.map((m) => [{ toolName: `mcp__${m.server}__${m.tool.replace(/[^A-Za-z0-9_-]/g, "_")}`.slice(0, 64), input: m.args }]);
  if (todos.length === 0) {
    turns.push(writes.map((w) => ({ toolName: "write_file", input: w })));
    turns.push(...runTurns(requestRuns), ...mcpTurns);
  } else {
    for (const [index, todo] of todos.entries()) {
      const mine = writes.filter((w) => owner(w.path) === todo);
      turns.push([
        { toolName: "update_todo", input: { id: todo.id, status: "in_progress" } },
        ...mine.map((w) => ({ toolName: "write_file", input: w })),
      ]);
      // A tasks.md task's own [run:] markers (in its description lines), then the request's at the last task.
      if (tasksRun && todo.description) turns.push(...runTurns(parseInstructions(todo.description).runs));
      if (index === todos.length - 1 && holdsLast) turns.push(...runTurns(requestRuns), ...mcpTurns);
      // PAOR: progress is recorded as each todo finishes.
      const wrote = mine.map((w) => w.path);
      turns.push([
        { toolName: "record_progress", input: { taskId: todo.id, progress: 1, changed: wrote.length ? `Wrote ${wrote.join(", ")}.` : "Nothing to change." } },
        { toolName: "update_todo", input: { id: todo.id, status: "done" } },
      ]);
    }
  }
  // A call the project's policy held and a person then approved is repeated, exactly, as a model would; that extra
  // turn does not advance the script.
  const approvals = prompt.filter((m) => m.role === "user" && m.content.some((p) => p.type === "text" && / approved: .+ \((run_command|write_file|edit_file|mcp)\)\./.test(p.text))).length;
  const last = prompt.at(-1);
  if (last?.role === "user" && last.content.some((p) => p.type === "text" && / approved: .+ \((run_command|write_file|edit_file|mcp)\)\./.test(p.text))) {
    const held = heldCall(prompt);
    if (held) return { toolCalls: [held] };
  }
  // [replan:]: the first call proposes a re-plan; once decided, the script runs on the todos it left. In parallel
  // sessions the plan's first task's proposes it, once: a plan that already has the task handling it is not re-planned.
  const replanned = prompt.some((m) => m.role === "assistant" && m.content.some((p) => p.type === "tool-call" && p.toolName === "propose_replan"));
  const proposes = !parallel || (todos.some((t) => t.id === planTaskIds[0]) && !planTasks.includes(": Handle what the implementer observed"));
  if (ins.replan && !replanned && proposes) {
    return { toolCalls: [{ toolName: "propose_replan", input: { observation: ins.replan, proposal: "Add a task that handles it before finishing." } }] };
  }
  // A failed per-task check reopened a task (<verify-failure>): a fix pass of two turns writes the ```fix: files and
  // marks the task done again; those turns do not advance the script.
  const fix = fixPass(ins, prompt);
  if (fix.next) return { toolCalls: fix.next };
  const done =
    prompt.filter((m) => m.role === "assistant" && m.content.some((p) => p.type === "tool-call")).length - approvals - (replanned ? 1 : 0) - fix.turns;
  const next = turns[done];
  if (next) return { toolCalls: next };
  return { text: `Done (demo model, scripted). Wrote ${writes.map((w) => w.path).join(", ")}.` };
}

// ── debug step ────────────────────────────────────────────────────────────────────────────────────────────────────

/** The debug step's verdict on a failed per-task check: [debug: <category>], else a test failure to fix. */
function debugReply(ins: DemoInstructions, prompt: string) {
  const category = ["compile", "test", "environment", "plan"].includes(ins.debug ?? "") ? ins.debug! : "test";
  const command = /Command: (.*)/.exec(readSection(prompt, "verify-failure") ?? "")?.[1] ?? "the check";
  return {
    category,
    action: category === "environment" ? "ask" : category === "plan" ? "escalate" : "fix",
    reason: `Demo debug step (scripted, not AI): \`${command}\` failed; classified as ${category}${ins.debug ? " ([debug:] in the request)" : ""}.`,
    question: category === "environment" ? `Demo: \`${command}\` needs something the sandbox lacks. What should the implementer do?` : null,
  };
}

// ── validator ─────────────────────────────────────────────────────────────────────────────────────────────────────

function reviewReply(ins: DemoInstructions, prompt: string) {
  const attempt = Number(readSection(prompt, "validation-attempt") ?? "1") || 1;
  let checks: Array<{ criterion: string; passed: boolean }> = [];
  try {
    checks = JSON.parse(readSection(prompt, "checks") ?? "[]");
  } catch {
    checks = [];
  }
  const red = checks.filter((c) => !c.passed);
  if (red.length) {
    return {
      passed: false,
      findings: red.map((c) => ({ severity: "major", criterion: c.criterion, evidence: "Its command failed." })),
      feedback: `Make these checks pass: ${red.map((c) => c.criterion).join(", ")}.`,
    };
  }
  if (attempt <= ins.failValidation) {
    return {
      passed: false,
      findings: [
        {
          severity: "minor",
          criterion: checks[0]?.criterion ?? "AC1",
          evidence: `Scripted failure ${attempt} of ${ins.failValidation} ([fail-validation: ${ins.failValidation}] in the request).`,
        },
      ],
      feedback: "Scripted demo feedback: try again.",
    };
  }
  return { passed: true, findings: [], feedback: "" };
}

/** The alignment score, blind to the checks: 10, or 7 for a scripted failure ([fail-validation: N], attempts 1..N). */
function alignmentReply(ins: DemoInstructions, prompt: string) {
  const attempt = Number(readSection(prompt, "validation-attempt") ?? "1") || 1;
  if (attempt <= ins.failValidation) return { alignmentScore: 7, rationale: `Scripted: attempt ${attempt} of ${ins.failValidation} falls short.` };
  return { alignmentScore: 10, rationale: "Scripted: the change does what the plan says." };
}
