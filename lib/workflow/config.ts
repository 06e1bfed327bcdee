import { z } from "zod";

/**
 * The provider of a model named without one (the seed design's `deepseek-reasoner`, `claude-3-5-sonnet-20241022`,
 * `gpt-4o-mini`), by the model family's name; undefined when the name says nothing about its provider.
 */
const PROVIDER_BY_FAMILY: Array<[RegExp, string]> = [
  [/^deepseek-/, "deepseek"],
  [/^claude-/, "anthropic"],
  [/^(gpt-|o\d(-|$)|chatgpt-)/, "openai"],
  [/^gemini-/, "google"],
];
/** `provider:model` as is; a bare model name of a known family gets its provider (`gpt-4o-mini` → `openai:gpt-4o-mini`). */
export function qualifyModelId(id: unknown): unknown {
  if (typeof id !== "string") return id;
  const name = id.trim();
  if (name.includes(":")) return name;
  const family = PROVIDER_BY_FAMILY.find(([re]) => re.test(name));
  return family ? `${family[1]}:${name}` : name;
}

/** A model id: `provider:model`, e.g. `anthropic:claude-sonnet-4-5`, `demo:default` (or a bare name of a known family). */
export const modelIdSchema = z.preprocess(qualifyModelId, z
  .string()
  .trim()
  .regex(/^[a-z][a-z0-9-]*:[^\s]+$/, "must be a model id of the form provider:model (e.g. demo:default), or a model name of a known family (deepseek-…, claude-…, gpt-…, gemini-…)"));

const trust = z.enum(["auto", "manual"], { error: 'must be "auto" or "manual"' });
const minutes = z
  .number({ error: "must be a number of minutes" })
  .int("must be a whole number of minutes")
  .min(1, "must be at least 1 minute")
  .max(60 * 24 * 7, "must be at most 10080 minutes (7 days)");

/** Paths a model's edit waits for a person's approval on, unless the project's `policy.protectedPaths` says otherwise. */
export const DEFAULT_PROTECTED_PATHS = [
  ".github/**",
  ".gitlab-ci.yml",
  "**/package-lock.json",
  "**/yarn.lock",
  "**/pnpm-lock.yaml",
  "**/Cargo.lock",
  "**/poetry.lock",
  "**/go.sum",
  "**/migrations/**",
  "drizzle/**",
];

const commandList = z
  .array(z.string().trim().min(1, "must not be empty").max(200, "must be at most 200 characters"), { error: "must be a list of command prefixes" })
  .max(100, "must have at most 100 entries");

/** The seed's RunConfig. Unknown keys are refused so that a typo never silently falls back to a default. */
/** One stage's budget: total tokens (in + out) and cost in USD (the price table) over the run. */
const stageBudgetSchema = z.strictObject({
  tokens: z.number({ error: "must be a number" }).int("must be a whole number").positive("must be more than 0").optional(),
  costUsd: z.number({ error: "must be a number" }).positive("must be more than 0").optional(),
  /** Working wall time in minutes (the time the stage worked, over the run; waits for people do not count). */
  minutes: z.number({ error: "must be a number of minutes" }).positive("must be more than 0").max(60 * 24 * 7, "must be at most 10080 minutes (7 days)").optional(),
});

/** A duration: a whole number with a unit, `30s`, `10m`, `2h`, `3d`. */
const DURATION = /^(\d{1,6})(s|m|h|d)$/;
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export function durationMs(text: string): number {
  const m = DURATION.exec(text.trim());
  if (!m) throw new Error(`not a duration: ${text}`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}
const duration = z
  .string({ error: 'must be a duration such as "30s", "10m", "2h" or "3d"' })
  .trim()
  .regex(DURATION, 'must be a duration such as "30s", "10m", "2h" or "3d"')
  // Past a failed regex too (zod runs every check): only a well-formed duration is measured.
  .refine((d) => !DURATION.test(d) || (durationMs(d) >= 1_000 && durationMs(d) <= 365 * 86_400_000), "must be between 1 second and 365 days");
/** A reminder point: a duration after the decision opened (`"1h"`), or before its deadline (`"10m before"`). */
const reminderPoint = z
  .string({ error: 'must be a reminder point such as "1h" (after it opened) or "10m before" (the deadline)' })
  .trim()
  .regex(/^\d{1,6}(s|m|h|d)( before)?$/, 'must be a reminder point such as "1h" (after it opened) or "10m before" (the deadline)');

/** The decisions that can have a deadline: every gate kind the workflow opens, and clarification questions. */
export const DEADLINE_SUBJECTS = ["plan", "implementation", "fix", "escalation", "budget", "conflict", "policy", "clarification"] as const;
export type DeadlineSubject = (typeof DEADLINE_SUBJECTS)[number];
/** The decision a declared default may take, per gate kind (a question's default is its answer, any text). */
export const DEFAULT_DECISIONS: Partial<Record<DeadlineSubject, readonly string[]>> = {
  plan: ["approve", "reject"],
  implementation: ["approve", "reject"],
  escalation: ["approve", "reject"],
  conflict: ["approve", "reject"],
  policy: ["approve", "reject"],
  fix: ["retry", "accept", "cancel"],
};

/** Who a timed-out decision escalates to: the members of a project role (or a higher one), or one named user. */
const escalationTarget = z.union([
  z.strictObject({ role: z.enum(["owner", "approver", "viewer"], { error: 'must be "owner", "approver" or "viewer"' }) }),
  z.strictObject({ userId: z.string().trim().min(1, "must not be empty").max(100) }),
], { error: 'must be {role: "owner" | "approver" | "viewer"} or {userId: "..."}' });

export const onTimeoutSchema = z.discriminatedUnion(
  "action",
  [
    z.strictObject({ action: z.literal("escalate"), to: escalationTarget }),
    z.strictObject({ action: z.literal("default"), answer: z.string().trim().min(1, "must not be empty").max(5_000) }),
    z.strictObject({ action: z.literal("cancel") }),
  ],
  { error: 'must be {action: "escalate", to}, {action: "default", answer} or {action: "cancel"}' },
);
export type OnTimeout = z.output<typeof onTimeoutSchema>;

/** One kind of decision's deadline (lib/runs/deadlines.ts): when, the reminders before it, and what happens then. */
const decisionDeadlineSchema = z.strictObject({
  after: duration,
  remind: z.array(reminderPoint).max(10, "must have at most 10 reminder points").default([]),
  onTimeout: onTimeoutSchema,
});
export type DecisionDeadline = z.output<typeof decisionDeadlineSchema>;

const deadlinesSchema = z
  .strictObject(Object.fromEntries(DEADLINE_SUBJECTS.map((k) => [k, decisionDeadlineSchema.optional()])) as Record<DeadlineSubject, z.ZodOptional<typeof decisionDeadlineSchema>>)
  .superRefine((deadlines, ctx) => {
    for (const subject of DEADLINE_SUBJECTS) {
      const onTimeout = deadlines[subject]?.onTimeout;
      if (onTimeout?.action !== "default" || subject === "clarification") continue;
      const allowed = DEFAULT_DECISIONS[subject];
      if (!allowed) {
        ctx.addIssue({ code: "custom", path: [subject, "onTimeout"], message: `a ${subject} gate has no default decision; use "escalate" or "cancel"` });
      } else if (!allowed.includes(onTimeout.answer)) {
        ctx.addIssue({ code: "custom", path: [subject, "onTimeout", "answer"], message: `must be one of: ${allowed.join(", ")}` });
      }
    }
  });

export const runConfigSchema = z.strictObject({
  trustMode: z
    .strictObject({
      planning: trust.default("manual"),
      implementation: trust.default("auto"),
      fixes: trust.default("auto"),
    })
    .prefault({}),
  maxClarifications: z
    .number({ error: "must be a number" })
    .int("must be a whole number")
    .min(0, "must be 0 or more")
    .max(20, "must be at most 20")
    .default(3),
  modelRouting: z
    .strictObject({
      planner: modelIdSchema.optional(),
      implementer: modelIdSchema.optional(),
      validator: modelIdSchema.optional(),
    })
    .prefault({}),
  timeoutMinutes: z
    .strictObject({
      planning: minutes.default(30),
      implementation: minutes.default(120),
      validation: minutes.default(30),
    })
    .prefault({}),
  git: z
    .strictObject({
      createPR: z.boolean({ error: "must be true or false" }).default(true),
      autoMerge: z.boolean({ error: "must be true or false" }).default(false),
      baseBranch: z
        .string()
        .trim()
        .min(1, "must not be empty")
        .max(200)
        .regex(/^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/, "must be a valid git branch name")
        .default("main"),
      /**
       * The seed design's stages a person approves before their work lands: "planning" → the plan gate
       * (trustMode.planning manual), "implementation" → the implementation gate on the diff before validation and
       * delivery (trustMode.implementation manual), "fixes" → the fix gate (trustMode.fixes manual). See resolveRunConfig.
       */
      requireApprovalFor: z
        .array(z.enum(["planning", "implementation", "fixes"], { error: 'must be "planning", "implementation" or "fixes"' }), { error: "must be a list of stages" })
        .max(3)
        .optional(),
    })
    .prefault({}),
  limits: z
    .strictObject({
      /** Automatic fix loops after a failed validation (fixes: auto). */
      maxFixAttempts: z.number().int().min(0).max(10).default(3),
      /** Re-plans after a rejected plan before the run fails. */
      maxReplans: z.number().int().min(0).max(10).default(3),
      /** Implementer model turns per attempt. */
      maxIterations: z.number().int().min(1).max(200).default(30),
      /**
       * Plan tasks whose dependencies are merged run at the same time, up to this many (each in its own worktree,
       * branch, sandbox and implementer conversation); 1 = one conversation does every task in order.
       */
      maxConcurrentTasks: z.number({ error: "must be a number" }).int("must be a whole number").min(1, "must be at least 1").max(10, "must be at most 10").default(3),
      /**
       * This run computes only while fewer than this many of its user's runs compute (never more than the server's
       * MAX_CONCURRENT_RUNS_PER_USER): 1 = "run this one alone". Unset = the server's limit.
       */
      maxConcurrency: z.number({ error: "must be a number" }).int("must be a whole number").min(1, "must be at least 1").max(100, "must be at most 100").optional(),
    })
    .prefault({}),
  validation: z
    .strictObject({
      /** Minimum 0–10 alignment score the validator must give for a pass. */
      scoreThreshold: z.number().min(0).max(10).default(9),
    })
    .prefault({}),
  /**
   * What a stage may spend (tokens, cost, working minutes) before a person decides (a `budget` gate: raise, cancel,
   * and for implementation also "finish the task in progress, then stop"). `timeoutMinutes` stays the hard cut.
   */
  budgets: z
    .strictObject({
      planning: stageBudgetSchema.optional(),
      implementation: stageBudgetSchema.optional(),
      validation: stageBudgetSchema.optional(),
    })
    .optional(),
  /**
   * Deadlines on decisions (seed 000's HITL timeouts), per gate kind and for clarification questions: reminders at
   * `remind`, and at `after` the onTimeout action. Unset = no deadline (the run waits for a person as long as it takes).
   */
  deadlines: deadlinesSchema.optional(),
  /** The policy for the implementer's risky actions (lib/agents/policy.ts). */
  policy: z
    .strictObject({
      /** Globs (`**`, `*`, `?`) of paths whose edits wait for a person's approval (a `policy` gate). */
      protectedPaths: z
        .array(z.string().trim().min(1, "must not be empty").max(200), { error: "must be a list of path globs" })
        .max(100)
        .default(DEFAULT_PROTECTED_PATHS),
      commands: z
        .strictObject({
          /** When not empty, only command lines starting with one of these (word by word) may run. */
          allow: commandList.default([]),
          /** Command lines starting with one of these are refused. */
          deny: commandList.default([]),
        })
        .prefault({}),
      maxFilesPerTask: z.number({ error: "must be a number" }).int("must be a whole number").min(1, "must be at least 1").max(10_000).default(40),
      maxFilesPerRun: z.number({ error: "must be a number" }).int("must be a whole number").min(1, "must be at least 1").max(100_000).default(150),
      /**
       * MCP tools (lib/agents/mcp/policy.ts): `"<server>.<tool>"` or `"<server>.*"` → allow | ask | deny. Unset, a
       * repository-declared server's tools ask and a project-declared server's are allowed.
       */
      mcp: z
        .record(
          z.string().regex(/^[A-Za-z0-9_-]{1,32}\.(\*|\S{1,128})$/, 'keys are "<server>.<tool>" or "<server>.*"'),
          z.enum(["allow", "ask", "deny"], { error: 'must be "allow", "ask" or "deny"' }),
        )
        .default({}),
    })
    .prefault({}),
  /**
   * Where the plan's tasks come from (lib/agents/tasks-md.ts): `auto` — a tasks.md pasted into the request (a fenced
   * block with the info string `tasks.md`), else the planner; `repository` — tasks.md or .autonomous/tasks.md on the
   * run's branch (a pasted one still wins); `none` — always the planner.
   */
  tasks: z
    .strictObject({
      source: z.enum(["auto", "repository", "none"], { error: 'must be "auto", "repository" or "none"' }).default("auto"),
    })
    .prefault({}),
  /** Triage before implementing: a task whose own checks pass may be found already done (lib/runs/triage.ts). */
  triage: z
    .strictObject({
      enabled: z.boolean({ error: "must be true or false" }).default(true),
      /** A task found done with at least this confidence (0–1) is skipped; below it, it is implemented anyway. */
      threshold: z.number({ error: "must be a number" }).min(0, "must be between 0 and 1").max(1, "must be between 0 and 1").default(0.8),
    })
    .prefault({}),
  /**
   * Per-task verification (seed 003): right after a task is finished its own acceptance commands (a plan task's
   * `checks`, tasks.md `Check:` lines) run; a failure goes to a debug step that classifies it and fixes, asks or
   * escalates. `maxDebugAttempts`: debug steps per task before it escalates to a person whatever the verdict.
   */
  verification: z
    .strictObject({
      enabled: z.boolean({ error: "must be true or false" }).default(true),
      maxDebugAttempts: z.number({ error: "must be a number" }).int("must be a whole number").min(0, "must be at least 0").max(10, "must be at most 10").default(2),
    })
    .prefault({}),
  /**
   * The implementer's bounded context: past `summariseAt` of the model's context window (the provider registry's, or
   * `window` here, in tokens) the conversation sent to the model is summarised, keeping the plan, the todo list, the
   * decisions and the last `keepToolResults` tool results verbatim (lib/agents/context.ts).
   */
  context: z
    .strictObject({
      window: z.number({ error: "must be a number" }).int("must be a whole number").min(1_000, "must be at least 1000 tokens").max(10_000_000).optional(),
      summariseAt: z.number({ error: "must be a number" }).min(0.2, "must be between 0.2 and 0.95").max(0.95, "must be between 0.2 and 0.95").default(0.7),
      keepToolResults: z.number({ error: "must be a number" }).int("must be a whole number").min(1, "must be at least 1").max(50, "must be at most 50").default(6),
    })
    .prefault({}),
  /** Only honoured in a project's default config (lib/runs/service.ts): a run's own config cannot lower isolation. */
  sandbox: z
    .strictObject({
      /** Let runs start when agent commands cannot be isolated (no bubblewrap, or GATEHOUSE_SANDBOX_ISOLATION=none). */
      allowUnisolated: z.boolean({ error: "must be true or false" }).default(false),
    })
    .optional(),
  /** GitHub projects only (see lib/github/handlers.ts). Optional, so configs of other projects keep their shape. */
  github: z
    .strictObject({
      /** A review that requests changes on the run's pull request starts a follow-up run with the review as feedback. */
      followUpOnReview: z.boolean({ error: "must be true or false" }).default(false),
    })
    .optional(),
});

export type RunConfigInput = z.input<typeof runConfigSchema>;
export type RunConfig = z.output<typeof runConfigSchema> & {
  modelRouting: { planner: string; implementer: string; validator: string };
};

export type Stage = "planning" | "implementation" | "validation" | "delivery";
export const STAGES: readonly Stage[] = ["planning", "implementation", "validation", "delivery"];

/**
 * Keys whose value is one of several shapes (a deadline's onTimeout: escalate | default | cancel): an upper layer's
 * replaces the lower's whole, since a merge of two shapes would be neither.
 */
const REPLACED_WHOLE = new Set(["onTimeout"]);

/** Deep-merge plain objects: `over` wins; arrays and scalars replace. */
export function mergeConfig(base: unknown, over: unknown): unknown {
  if (isPlainObject(base) && isPlainObject(over)) {
    const out: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(over)) out[k] = v === undefined ? out[k] : REPLACED_WHOLE.has(k) ? v : mergeConfig(out[k], v);
    return out;
  }
  return over === undefined ? base : over;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Resolve a run's config: project defaults under the request's own config, validated, with every stage's model filled
 * from `defaultRouting` when neither names one.
 */
export function resolveRunConfig({
  input,
  projectDefaults = {},
  defaultRouting,
}: {
  input: unknown;
  projectDefaults?: unknown;
  defaultRouting: { planner: string; implementer: string; validator: string };
}): z.ZodSafeParseResult<RunConfig> {
  const merged = mergeConfig(projectDefaults ?? {}, input ?? {});
  const parsed = runConfigSchema.safeParse(merged);
  if (!parsed.success) return parsed as z.ZodSafeParseResult<RunConfig>;
  const routing = parsed.data.modelRouting;
  // git.requireApprovalFor: a stage named there waits for a person whatever trustMode says for it.
  const trustMode = { ...parsed.data.trustMode };
  for (const stage of parsed.data.git.requireApprovalFor ?? []) trustMode[stage] = "manual";
  return {
    success: true,
    data: {
      ...parsed.data,
      trustMode,
      modelRouting: {
        planner: routing.planner ?? defaultRouting.planner,
        implementer: routing.implementer ?? defaultRouting.implementer,
        validator: routing.validator ?? defaultRouting.validator,
      },
    },
  };
}
