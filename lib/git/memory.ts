import path from "node:path";
import { z } from "zod";
import { AppError, describeIssues } from "@/lib/errors";
import { redact } from "@/lib/redact";
import { mergeConfig, runConfigSchema } from "@/lib/workflow";
import { commitFiles, commitMessage, readFileAt, readFilesAt, type CommitResult } from "./commit-files";
import { git } from "./run";
import { AUTONOMOUS_DIR } from "./records";
import { learnFromRepository, type Learned } from "./learn";

export const MEMORY_PATH = `${AUTONOMOUS_DIR}/memory.md`;
export const CONFIG_PATH = `${AUTONOMOUS_DIR}/config.json`;

// ---------------------------------------------------------------------------------------------------------------------
// .autonomous/memory.md — front matter (project, techStack, patterns) + "## Past Decisions"

export type PastDecision = { heading: string; runId: string | null; body: string };
export type ProjectMemory = {
  project: string;
  techStack: string[];
  patterns: string[];
  /**
   * What Gatehouse learned last time (lib/git/learn.ts), kept apart from what the lists say: only what is newly learned
   * is added to techStack/patterns, so a person's edit to them (an item removed or reworded) is kept. Absent: never learned.
   */
  learnedTechStack?: string[];
  learnedPatterns?: string[];
  /** Free text between the front matter and "## Past Decisions". */
  notes: string;
  pastDecisions: PastDecision[];
};

function parseScalar(raw: string): string {
  const v = raw.trim();
  if (v.startsWith('"')) {
    try {
      return String(JSON.parse(v));
    } catch {
      return v.slice(1, -1);
    }
  }
  if (v.startsWith("'") && v.endsWith("'")) return v.slice(1, -1).replace(/''/g, "'");
  return v;
}

/** The small YAML subset memory.md uses: `key: value`, `key: [a, b]`, and `key:` followed by `- item` lines. */
function parseFrontMatter(text: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  let listKey: string | null = null;
  for (const line of text.split("\n")) {
    const item = /^\s*-\s+(.*)$/.exec(line);
    if (item && listKey) {
      (out[listKey] as string[]).push(parseScalar(item[1]!));
      continue;
    }
    const kv = /^([A-Za-z][\w-]*):\s*(.*)$/.exec(line);
    if (!kv) continue;
    const [, key, value] = kv as unknown as [string, string, string];
    if (value.trim() === "") {
      out[key] = [];
      listKey = key;
    } else if (value.trim().startsWith("[")) {
      const inner = value.trim().replace(/^\[|\]$/g, "");
      out[key] = inner.trim() === "" ? [] : inner.split(",").map(parseScalar);
      listKey = null;
    } else {
      out[key] = parseScalar(value);
      listKey = null;
    }
  }
  return out;
}

export function parseMemory(text: string, fallbackProject = "project"): ProjectMemory {
  const fm = /^---\n([\s\S]*?)\n---\n?/.exec(text);
  const front = fm ? parseFrontMatter(fm[1]!) : {};
  const rest = fm ? text.slice(fm[0].length) : text;
  const marker = /^## Past Decisions[ \t]*$/m.exec(rest);
  const notes = (marker ? rest.slice(0, marker.index) : rest).trim();
  const decisionsText = marker ? rest.slice(marker.index + marker[0].length) : "";
  const pastDecisions = decisionsText
    .split(/^### /m)
    .slice(1)
    .map((block) => {
      const [heading = "", ...body] = block.split("\n");
      return { heading: heading.trim(), runId: /\b(run_[a-z0-9]+)\b/.exec(heading)?.[1] ?? null, body: body.join("\n").trim() };
    });
  const list = (v: unknown) => (Array.isArray(v) ? v : typeof v === "string" && v ? [v] : []);
  return {
    project: typeof front.project === "string" && front.project ? front.project : fallbackProject,
    techStack: list(front.techStack),
    patterns: list(front.patterns),
    ...("learnedTechStack" in front ? { learnedTechStack: list(front.learnedTechStack) } : {}),
    ...("learnedPatterns" in front ? { learnedPatterns: list(front.learnedPatterns) } : {}),
    notes,
    pastDecisions,
  };
}

export function renderMemory(memory: ProjectMemory): string {
  const list = (items: string[]) => (items.length ? items.map((i) => `  - ${JSON.stringify(i)}`).join("\n") : "");
  return [
    "---",
    `project: ${JSON.stringify(memory.project)}`,
    `techStack:${memory.techStack.length ? `\n${list(memory.techStack)}` : " []"}`,
    `patterns:${memory.patterns.length ? `\n${list(memory.patterns)}` : " []"}`,
    ...(memory.learnedTechStack ? [`learnedTechStack:${memory.learnedTechStack.length ? `\n${list(memory.learnedTechStack)}` : " []"}`] : []),
    ...(memory.learnedPatterns ? [`learnedPatterns:${memory.learnedPatterns.length ? `\n${list(memory.learnedPatterns)}` : " []"}`] : []),
    "---",
    "",
    memory.notes || "# Project memory\n\nWhat Gatehouse has learned about this repository. Read by the planner before every run.",
    "",
    "## Past Decisions",
    "",
    ...memory.pastDecisions.flatMap((d) => [`### ${d.heading}`, "", d.body, ""]),
  ].join("\n");
}

/** The most of memory.md the project's cached copy (projects.memory, shown on the Projects page) holds. */
export const MEMORY_SNAPSHOT_MAX_CHARS = 64_000;
/** A memory.md larger than this is not read at all: its snapshot only says where the file is. */
const MEMORY_SNAPSHOT_MAX_BYTES = 1_048_576;

/**
 * The copy of `.autonomous/memory.md` at `ref` that the database caches for display: redacted, cut to
 * MEMORY_SNAPSHOT_MAX_CHARS with a note, and never read when the blob is over a megabyte (a note instead). Null when
 * the file does not exist at `ref`. Host-side git as everywhere here (lib/git/run.ts: no hooks, no repository config).
 */
export async function readMemorySnapshot({ repoPath, ref }: { repoPath: string; ref: string }): Promise<string | null> {
  const size = await git(repoPath, ["cat-file", "-s", `${ref}:${MEMORY_PATH}`], { allowFailure: true });
  if (size.code !== 0) return null;
  const bytes = Number(size.stdout.trim());
  const where = `the full file is ${MEMORY_PATH} on ${ref.replace(/^refs\/heads\//, "")}`;
  if (!Number.isFinite(bytes) || bytes > MEMORY_SNAPSHOT_MAX_BYTES) return `_(The project memory is too large to show here (${bytes} bytes): ${where}.)_\n`;
  const raw = await readFileAt({ repoPath, ref, path: MEMORY_PATH });
  if (raw === null) return null;
  const text = redact(raw);
  return text.length <= MEMORY_SNAPSHOT_MAX_CHARS ? text : `${text.slice(0, MEMORY_SNAPSHOT_MAX_CHARS)}\n\n_(Cut here: ${where}.)_\n`;
}

/** The project's memory at a ref (an empty memory named after the repository when the file does not exist yet). */
export async function readMemory({ repoPath, ref }: { repoPath: string; ref: string }): Promise<ProjectMemory & { raw: string | null }> {
  const raw = await readFileAt({ repoPath, ref, path: MEMORY_PATH });
  return { ...parseMemory(raw ?? "", path.basename(path.resolve(repoPath))), raw };
}

/**
 * Learned items merged into the front matter: only what was not learned before (and is not there already, in any
 * case) is added, so a person's edit — an item removed or reworded — is kept; nothing is ever removed.
 */
export function mergeLearned(memory: ProjectMemory, learned: Learned): ProjectMemory {
  const fresh = (items: string[], before: string[] | undefined, current: string[]) => {
    const seen = new Set([...(before ?? []), ...current].map((i) => i.toLowerCase()));
    return items.filter((i) => !seen.has(i.toLowerCase()));
  };
  const union = (a: string[] | undefined, b: string[]) => [...new Set([...(a ?? []), ...b])];
  return {
    ...memory,
    techStack: [...memory.techStack, ...fresh(learned.techStack, memory.learnedTechStack, memory.techStack)],
    patterns: [...memory.patterns, ...fresh(learned.patterns, memory.learnedPatterns, memory.patterns)],
    learnedTechStack: union(memory.learnedTechStack, learned.techStack),
    learnedPatterns: union(memory.learnedPatterns, learned.patterns),
  };
}

/** How much of "Past Decisions" a run is given (the newest entries first; the oldest are left out, with a note). */
export const MEMORY_DECISIONS_MAX_CHARS = 24_000;
/** Run branches looked at for decisions the base does not have (the newest first). */
const MEMORY_BRANCHES_MAX = 200;

const decisionDate = (d: PastDecision) => /^\d{4}-\d{2}-\d{2}/.exec(d.heading)?.[0] ?? "";

/**
 * The project memory a new run should see: the memory on `ref` (its base), plus every delivered run's past decisions
 * (a run branch's memory.md has its entry from delivery on) that the base does not have yet — merged or not, so no
 * unmerged run drops out — within MEMORY_DECISIONS_MAX_CHARS, the newest kept. A memory that never learned the
 * repository's stack and patterns gets them learned from `ref` for the reading.
 */
export async function readLatestMemory({ repoPath, ref }: { repoPath: string; ref: string }): Promise<ProjectMemory & { raw: string | null }> {
  let base: ProjectMemory & { raw: string | null } = await readMemory({ repoPath, ref });
  let changed = false;
  if (!base.learnedTechStack) {
    base = { ...mergeLearned(base, await learnFromRepository({ repoPath, ref })), raw: base.raw };
    changed = base.techStack.length + base.patterns.length > 0;
  }
  const refs = await git(repoPath, ["for-each-ref", "--sort=-committerdate", `--count=${MEMORY_BRANCHES_MAX}`, "--format=%(refname)", "refs/heads/autonomous/"], {
    allowFailure: true,
  });
  const own = `refs/heads/${ref}`;
  const known = new Set(base.pastDecisions.map((d) => d.runId ?? d.heading));
  const added: PastDecision[] = [];
  // Every branch's memory.md with one git process, and each distinct file parsed once: a branch whose run has not been
  // delivered carries its base's memory unchanged.
  const others = refs.stdout.split("\n").filter((r) => r && r !== own && r !== ref);
  const files = await readFilesAt({ repoPath, files: others.map((other) => ({ ref: other, path: MEMORY_PATH })) });
  const seenBlobs = new Set<string>();
  for (const file of files) {
    if (!file || seenBlobs.has(file.blob)) continue;
    seenBlobs.add(file.blob);
    for (const d of parseMemory(file.content, base.project).pastDecisions) {
      const key = d.runId ?? d.heading;
      if (known.has(key)) continue;
      known.add(key);
      added.push(d);
    }
  }
  const entrySize = (d: PastDecision) => d.heading.length + d.body.length + 8;
  if (!added.length && !changed && base.pastDecisions.reduce((n, d) => n + entrySize(d), 0) <= MEMORY_DECISIONS_MAX_CHARS) return base;
  // Oldest first, as the file reads; then the newest that fit.
  const all = [...base.pastDecisions, ...added].map((d, i) => ({ d, i })).sort((a, b) => decisionDate(a.d).localeCompare(decisionDate(b.d)) || a.i - b.i).map((x) => x.d);
  const kept: PastDecision[] = [];
  let size = 0;
  for (const d of [...all].reverse()) {
    size += entrySize(d);
    if (size > MEMORY_DECISIONS_MAX_CHARS && kept.length) break;
    kept.unshift(d);
  }
  const left = all.length - kept.length;
  const notes = left ? `${base.notes || "# Project memory"}\n\n_(${left} older past decision(s) left out here to keep the memory within ${MEMORY_DECISIONS_MAX_CHARS} characters.)_` : base.notes;
  const merged: ProjectMemory = { ...base, notes, pastDecisions: kept };
  return { ...merged, raw: renderMemory(merged) };
}

/**
 * Append this run's entry to "## Past Decisions" (once per run: a retried step does not append twice), merge the tech
 * stack and patterns newly learned from the branch (lib/git/learn.ts; a person's edit is kept), and commit memory.md on the run's branch so it lands with the run's merge.
 */
export async function updateMemory({
  repoPath,
  branch,
  runId,
  title,
  outcome,
  decisions,
  techStack = [],
  patterns = [],
  date = new Date(),
}: {
  repoPath: string;
  branch: string;
  runId: string;
  title: string;
  outcome: string;
  decisions: string[];
  techStack?: string[];
  patterns?: string[];
  date?: Date;
}): Promise<CommitResult & { memory: ProjectMemory }> {
  // Learned from the branch as the run leaves it (what the run added counts), merged so a person's edit is kept.
  const learned = await learnFromRepository({ repoPath, ref: branch });
  const memory = mergeLearned(await readMemory({ repoPath, ref: branch }), {
    techStack: [...learned.techStack, ...techStack],
    patterns: [...learned.patterns, ...patterns],
  });
  const next: ProjectMemory = {
    ...memory,
    pastDecisions: memory.pastDecisions.some((d) => d.runId === runId)
      ? memory.pastDecisions
      : [
          ...memory.pastDecisions,
          {
            heading: `${date.toISOString().slice(0, 10)} — ${runId}: ${title.replace(/\s+/g, " ").slice(0, 120)}`,
            runId,
            body: [`- Outcome: ${outcome}`, `- Branch: ${branch}`, ...decisions.map((d) => `- ${d.replace(/\s+/g, " ")}`)].join("\n"),
          },
        ],
  };
  const result = await commitFiles({
    repoPath,
    branch,
    files: { [MEMORY_PATH]: renderMemory(next) },
    message: commitMessage({ subject: `Memory: record run ${runId} (${outcome})`, runId, kind: "memory" }),
  });
  return { ...result, memory: next };
}

// ---------------------------------------------------------------------------------------------------------------------
// .autonomous/config.json — project defaults

/** Run config keys a repository file may default. Not `sandbox`: the file's own `sandbox` block is its network setting,
 * and isolation is decided by the project's owner, never by repository content. */
const RUN_CONFIG_KEYS = (Object.keys(runConfigSchema.shape) as (keyof typeof runConfigSchema.shape)[]).filter((k) => k !== "sandbox");

export const projectFileConfigSchema = z
  .object({
    /** Paths (git pathspec globs) agents' work never commits and diffs never show: secrets, build output … */
    excludePaths: z.array(z.string().min(1).max(300)).max(200).default([]),
    sandbox: z.object({ allowInternet: z.boolean().default(false) }).prefault({}),
    /** The seed design's wrapper: only run-config keys, so a typo in it is refused rather than silently ignored. */
    defaultRunConfig: z
      .record(z.string(), z.unknown(), { error: "must be an object of run config keys" })
      .superRefine((wrapper, ctx) => {
        for (const key of Object.keys(wrapper)) {
          if (!(RUN_CONFIG_KEYS as string[]).includes(key)) ctx.addIssue({ code: "custom", path: [key], message: `is not a run config key (one of ${RUN_CONFIG_KEYS.join(", ")})` });
        }
      })
      .optional(),
  })
  .catchall(z.unknown());

export type ProjectFileConfig = {
  /** Partial RunConfig applied under each run's own config (resolveRunConfig's projectDefaults). */
  defaults: Record<string, unknown>;
  excludePaths: string[];
  allowInternet: boolean;
};

/** Read .autonomous/config.json at a ref; missing → empty defaults; malformed → AppError bad_request:config. */
export async function readProjectConfig({ repoPath, ref }: { repoPath: string; ref: string }): Promise<ProjectFileConfig> {
  const raw = await readFileAt({ repoPath, ref, path: CONFIG_PATH });
  if (raw === null) return { defaults: {}, excludePaths: [], allowInternet: false };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    throw new AppError("bad_request:config", `${CONFIG_PATH} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = projectFileConfigSchema.safeParse(json);
  if (!parsed.success) throw new AppError("bad_request:config", `${CONFIG_PATH}: ${describeIssues(parsed.error.issues)}`);
  // Both shapes: run-config keys at the top (flat), and the seed design's `defaultRunConfig` wrapper (or `defaults`)
  // over them; other top-level keys (`projectName` …) are descriptive and ignored.
  const file = json as Record<string, unknown>;
  let defaults: Record<string, unknown> = {};
  for (const source of [file, file.defaults, file.defaultRunConfig]) {
    if (typeof source !== "object" || source === null || Array.isArray(source)) continue;
    const picked: Record<string, unknown> = {};
    for (const key of RUN_CONFIG_KEYS) if ((source as Record<string, unknown>)[key] !== undefined) picked[key] = (source as Record<string, unknown>)[key];
    defaults = mergeConfig(defaults, picked) as Record<string, unknown>;
  }
  return { defaults, excludePaths: parsed.data.excludePaths, allowInternet: parsed.data.sandbox.allowInternet };
}
