import { AppError } from "@/lib/errors";

/**
 * tasks.md: a run's plan written by a person as markdown checkboxes (seed 001). The format:
 *
 *   - [ ] T1: Add the greeting
 *     Files: src/greet.ts, src/greet.test.ts
 *     Check: npm test -- greet
 *   - [x] T2: Set up the project          ← checked: already done, skipped
 *   - [ ] T3: Document it (after T1, T2)  ← "(after …)" at the end of the title: dependencies
 *     - [ ] T4: Write the usage section   ← nested: the parent (T3) depends on its children
 *
 * - A task is a list item `- [ ]` / `- [x]` (also `*` or `+`, `[X]`). Its id is the leading `<id>:` (letters, digits,
 *   `.`, `_`, `-`); without one it is `T<n>` by position.
 * - `(after T1, T2)` (or `(depends on …)`) at the end of the title names dependencies; a nested task is a dependency of
 *   the task it is nested under.
 * - Indented lines under a task: `Files: a, b` (the task's scope), `Check: <command>` (an acceptance command, may
 *   repeat), anything else is its description.
 * - Other lines (headings, prose) are ignored.
 */

export type TasksMdTask = {
  id: string;
  title: string;
  description: string;
  dependsOn: string[];
  files: string[];
  checks: string[];
  checked: boolean;
  /** 0-based line of the checkbox, for checkTask. */
  line: number;
};

/** Where a run's tasks.md is looked for in the repository, in this order. */
export const TASKS_MD_PATHS = ["tasks.md", ".autonomous/tasks.md"] as const;
/** Where a tasks.md pasted into the request is committed on the run branch (so its checkboxes can be kept). */
export const PASTED_TASKS_MD_PATH = ".autonomous/tasks.md";

const ITEM = /^(\s*)[-*+]\s+\[([ xX])\]\s+(.*)$/;
const ID = /^([A-Za-z][A-Za-z0-9._-]{0,31}):\s+(.*)$/;
const AFTER = /\s*\((?:after|depends on)\s+([^)]*)\)\s*$/i;
const PASTED = /^(`{3,}|~{3,})[ \t]*tasks\.md[ \t]*\n([\s\S]*?)^\1[ \t]*$/m;

const indentOf = (s: string) => s.replace(/\t/g, "  ").length;

function invalid(message: string): never {
  throw new AppError("bad_request:run", `tasks.md: ${message}`);
}

/** Parse a tasks.md; a duplicate id, an unknown dependency or a dependency cycle is an error naming the line. */
export function parseTasksMd(text: string): TasksMdTask[] {
  const lines = text.split("\n");
  const tasks: TasksMdTask[] = [];
  const stack: Array<{ indent: number; task: TasksMdTask }> = [];
  for (const [i, raw] of lines.entries()) {
    const item = ITEM.exec(raw);
    if (item) {
      const indent = indentOf(item[1]!);
      let title = item[3]!.trim();
      const named = ID.exec(title);
      const id = named ? named[1]! : `T${tasks.length + 1}`;
      if (named) title = named[2]!.trim();
      const after = AFTER.exec(title);
      const dependsOn = after ? after[1]!.split(/[,\s]+/).filter(Boolean) : [];
      if (after) title = title.slice(0, after.index).trim();
      if (!title) invalid(`line ${i + 1}: the task has no title.`);
      if (tasks.some((t) => t.id === id)) invalid(`line ${i + 1}: the id ${id} is used twice.`);
      const task: TasksMdTask = { id, title, description: "", dependsOn, files: [], checks: [], checked: item[2] !== " ", line: i };
      while (stack.length && stack.at(-1)!.indent >= indent) stack.pop();
      const parent = stack.at(-1)?.task;
      if (parent && !parent.dependsOn.includes(id)) parent.dependsOn.push(id);
      stack.push({ indent, task });
      tasks.push(task);
      continue;
    }
    if (!raw.trim()) continue;
    // An indented line belongs to the nearest task above it that is less indented; prose at the margin ends the list.
    const indent = indentOf(/^\s*/.exec(raw)![0]);
    while (stack.length && stack.at(-1)!.indent >= indent) stack.pop();
    const owner = stack.at(-1);
    if (!owner) continue;
    const body = raw.trim();
    const files = /^files?:\s*(.*)$/i.exec(body);
    const check = /^checks?:\s*(.*)$/i.exec(body);
    if (files) owner.task.files.push(...files[1]!.split(",").map((f) => f.trim().replace(/^`|`$/g, "")).filter(Boolean));
    else if (check && check[1]!.trim()) owner.task.checks.push(check[1]!.trim().replace(/^`|`$/g, ""));
    else owner.task.description = owner.task.description ? `${owner.task.description}\n${body}` : body;
  }
  if (!tasks.length) invalid("no tasks found; write each task as a markdown checkbox, e.g. `- [ ] T1: Add the greeting`.");
  const ids = new Set(tasks.map((t) => t.id));
  for (const t of tasks) {
    const unknown = t.dependsOn.find((d) => !ids.has(d));
    if (unknown) invalid(`line ${t.line + 1}: ${t.id} depends on ${unknown}, which is not a task here.`);
  }
  // A cycle would leave no order to work in.
  const state = new Map<string, "visiting" | "done">();
  const visit = (id: string, path: string[]) => {
    if (state.get(id) === "done") return;
    if (state.get(id) === "visiting") invalid(`the dependencies form a cycle: ${[...path, id].join(" → ")}.`);
    state.set(id, "visiting");
    for (const d of tasks.find((t) => t.id === id)!.dependsOn) visit(d, [...path, id]);
    state.set(id, "done");
  };
  for (const t of tasks) visit(t.id, []);
  return tasks;
}

/** The tasks.md pasted into a request (a fenced block whose info string is `tasks.md`), or null. */
export function pastedTasksMd(request: string): string | null {
  return PASTED.exec(request)?.[2] ?? null;
}

/** The text with task `id`'s checkbox checked (unchanged when it already is, or when there is no such task). */
export function checkTask(text: string, id: string): string {
  const task = parseTasksMd(text).find((t) => t.id === id);
  if (!task || task.checked) return text;
  const lines = text.split("\n");
  lines[task.line] = lines[task.line]!.replace(/\[ \]/, "[x]");
  return lines.join("\n");
}

function label(text: string): string {
  return `"${text.replace(/"/g, "'").replace(/[\n\r]/g, " ")}"`;
}

/**
 * The plan a tasks.md makes: its open tasks in order (a dependency on a checked task is already met), their checks as
 * acceptance criteria, a flowchart of the dependencies; checked tasks are listed as skipped. The file itself is part of
 * the last task's scope when it lives outside `.autonomous/` (its checkboxes change on the branch).
 */
export function planFromTasksMd({ text, path, title }: { text: string; path: string; title: string }) {
  const all = parseTasksMd(text);
  const open = all.filter((t) => !t.checked);
  const openIds = new Set(open.map((t) => t.id));
  const tasks = open.map((t) => ({
    id: t.id,
    title: t.title,
    description: t.description,
    dependsOn: t.dependsOn.filter((d) => openIds.has(d)),
    files: t.files,
    checks: t.checks,
  }));
  if (tasks.length && !path.startsWith(".autonomous/")) tasks[tasks.length - 1]!.files = [...tasks.at(-1)!.files, path];
  const mermaid = [
    "flowchart TD",
    `  R[${label(title)}]`,
    ...tasks.map((t) => `  ${mermaidId(t.id)}[${label(`${t.id}: ${t.title}`)}]`),
    ...tasks.map((t) => (t.dependsOn.length ? t.dependsOn.map((d) => `  ${mermaidId(d)} --> ${mermaidId(t.id)}`).join("\n") : `  R --> ${mermaidId(t.id)}`)),
  ].join("\n");
  return {
    summary: `From ${path}: ${open.length} open task${open.length === 1 ? "" : "s"}${all.length > open.length ? `, ${all.length - open.length} already checked (skipped)` : ""}.`,
    mermaid,
    tasks,
    acceptanceCriteria: open.flatMap((t) => t.checks.map((command, i) => ({ id: `${t.id}.${i + 1}`, description: `${t.id}: \`${command}\` succeeds`, command }))),
    risks: [],
    tasksFile: { path },
    skipped: all.filter((t) => t.checked).map((t) => ({ id: t.id, title: t.title, reason: `checked in ${path}` })),
  };
}

/** Task ids may hold `.` or `-`, which Mermaid node ids may not. */
function mermaidId(id: string): string {
  return `t_${id.replace(/[^A-Za-z0-9_]/g, "_")}`;
}
