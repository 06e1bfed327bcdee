import { createHash } from "node:crypto";
import { z } from "zod";
import { rows, tx, type Tx } from "./store";
import { readCappedText } from "@/lib/body";

/**
 * Inngest's async checkpointing endpoint, `POST /v1/checkpoint/{runId}/async` (see /work/shared/INNGEST_CHECKPOINTING.md
 * §3.2 and §5.1). An app that checkpoints runs its steps back to back inside one call and reports each finished step
 * here; this stores it exactly as a 206 `StepRun` would (memoized result, appended to the run's stack), gives the
 * dispatch a fresh attempt budget, and answers 200 with an empty body.
 *
 * The handler is a database operation: any process on the run's database may serve it (the web server, a worker, the
 * test harness). A dispatch is identified by what the executor sent in `ctx.qi_id` (`<worker id>/<generation>`); a
 * checkpoint from a dispatch whose lease or generation has moved on is answered 409, which stops the app's call
 * without failing the run.
 */

/** Inngest's limits (go:pkg/consts/consts.go): one step's output, and a run's whole state. */
export const MAX_STEP_OUTPUT_BYTES = 4 * 1024 * 1024;
export const MAX_RUN_STATE_BYTES = 32 * 1024 * 1024;
/** A checkpoint body is a few ops; anything past the run-state limit (plus envelope) cannot be stored anyway. */
const MAX_BODY_BYTES = MAX_RUN_STATE_BYTES + 1024 * 1024;

export const CHECKPOINT_PATH = /^\/v1\/checkpoint\/([^/]+)\/async\/?$/;

/** Opcodes Inngest accepts in an async checkpoint at all (anything else is an async op and belongs in a 206 reply). */
const CHECKPOINTABLE = new Set(["Step", "StepRun", "StepPlanned", "RunComplete", "SyncRunComplete", "StepFailed", "DeferAdd", "DeferAbort"]);

export const checkpointBodySchema = z.looseObject({
  run_id: z.string().min(1),
  fn_id: z.string().min(1),
  qi_id: z.string().min(1),
  generation_id: z.number().int().nullish(),
  request_started_at: z.number().nullish(),
  steps: z.array(z.looseObject({ id: z.string().min(1), op: z.string().min(1), data: z.unknown().optional() })),
});

type CheckpointBody = z.infer<typeof checkpointBodySchema>;

const nonEmpty = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const numberOrNone = (v: unknown) => v === undefined || v === null || typeof v === "number";

/**
 * The body as the SDK sends it, checked by hand with checkpointBodySchema's rules, without zod's per-call cost on
 * the hot path (a quarter of a checkpoint's CPU on Node 20). Anything it does not accept goes to the schema, which
 * accepts or refuses it with its message: what is accepted and refused stays the schema's
 * (tests/executor/checkpoint-body.test.ts).
 */
export function plainCheckpointBody(json: unknown): CheckpointBody | null {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return null;
  const b = json as Record<string, unknown>;
  if (!nonEmpty(b.run_id) || !nonEmpty(b.fn_id) || !nonEmpty(b.qi_id) || !Array.isArray(b.steps)) return null;
  if (!numberOrNone(b.generation_id) || (typeof b.generation_id === "number" && !Number.isSafeInteger(b.generation_id))) return null;
  if (!numberOrNone(b.request_started_at)) return null;
  for (const step of b.steps as unknown[]) {
    if (typeof step !== "object" || step === null || Array.isArray(step)) return null;
    const st = step as Record<string, unknown>;
    if (!nonEmpty(st.id) || !nonEmpty(st.op)) return null;
  }
  return b as CheckpointBody;
}

/** The dispatch token sent as ctx.qi_id. */
export function dispatchToken(workerId: string, generation: number): string {
  return `${workerId}/${generation}`;
}

function parseDispatch(token: string): { workerId: string; generation: number } | null {
  const at = token.lastIndexOf("/");
  const generation = Number(token.slice(at + 1));
  if (at <= 0 || !Number.isInteger(generation)) return null;
  return { workerId: token.slice(0, at), generation };
}

/**
 * A seam for crash tests: called with the run id after a checkpoint is accepted, or a reply reporting a finished step
 * is read (waits.ts handleOps), and before anything of it is stored (the moment where a step's side effects have
 * happened but its result is not recorded yet). Null in production.
 */
export const checkpointHooks: { beforeStore: ((runId: string) => Promise<void>) | null } = { beforeStore: null };

/** Stats for tests and benchmarks: how checkpoints were answered in this process. */
export const checkpointStats = { stored: 0, stale: 0, rejected: 0 };

function fail(status: number, message: string): Response {
  checkpointStats.rejected += status === 409 ? 0 : 1;
  return Response.json({ error: message, status }, { status });
}

/**
 * Handle one `POST /v1/checkpoint/{runId}/async`. The caller authenticates the request first (routes: the executor
 * key; in-process calls through the app's own `fetch` need none).
 */
export async function handleCheckpointRequest(request: Request): Promise<Response> {
  return handleCheckpoint(request.url, request.method, request);
}

/**
 * The same for a body the caller reads (`read` resolves to null past `limit`, which is the endpoint's own cap): the
 * in-process transports hand over the SDK's string body, and the worker reads it off its socket, without building a
 * `Request` around it. The caller authenticates first, as for handleCheckpointRequest.
 */
export async function handleCheckpointBody({
  url: href,
  method,
  read,
}: {
  url: string;
  method: string;
  read: (limit: number) => Promise<string | null>;
}): Promise<Response> {
  return handleCheckpoint(href, method, read);
}

/** The answer to a refused write: any refusal rolls the transaction back (see tx's rollbackIf). */
const refusedOutcome = (outcome: { refused: Response | null }) => outcome.refused !== null;

/**
 * Both entries' work, with the body read from the `Request`, given as the SDK's string (checkpointingFetch) or read by
 * the caller's `read`. No function is made per call here or in what it calls on the hot path: under tsx (the worker, the benches), esbuild's keepNames gives every named
 * closure a `__name` call (Object.defineProperty), about 2.5 µs each, and a checkpoint made nine of them.
 */
async function handleCheckpoint(href: string, method: string, source: Request | string | ((limit: number) => Promise<string | null>)): Promise<Response> {
  const url = new URL(href);
  const match = CHECKPOINT_PATH.exec(url.pathname);
  if (!match) return fail(404, `Only POST /v1/checkpoint/{runId}/async is served here (got ${url.pathname})`);
  if (method !== "POST") return fail(405, "Use POST to checkpoint steps");
  const text = typeof source === "string" ? source : source instanceof Request ? await readCappedText(source, MAX_BODY_BYTES) : await source(MAX_BODY_BYTES);
  if (text === null || (text.length > MAX_BODY_BYTES / 3 && Buffer.byteLength(text) > MAX_BODY_BYTES)) return fail(413, `Checkpoint body over ${MAX_BODY_BYTES} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail(400, "Checkpoint body must be JSON");
  }
  let checked = plainCheckpointBody(json);
  if (!checked) {
    const parsed = checkpointBodySchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return fail(400, `Bad checkpoint body: ${issue?.path.join(".") || "body"}: ${issue?.message}`);
    }
    checked = parsed.data;
  }
  const body = checked;
  const runId = decodeURIComponent(match[1]!);
  if (body.run_id !== runId) return fail(400, `run_id ${body.run_id} does not match the URL's run ${runId}`);
  const dispatch = parseDispatch(body.qi_id);
  if (!dispatch) return fail(400, `qi_id ${JSON.stringify(body.qi_id)} is not a dispatch token of this executor`);
  if (body.generation_id != null && body.generation_id !== dispatch.generation) {
    return fail(400, `generation_id ${body.generation_id} does not match qi_id ${body.qi_id}`);
  }
  const notAsync = body.steps.find((s) => !CHECKPOINTABLE.has(s.op));
  if (notAsync) return fail(400, `cannot checkpoint opcode ${notAsync.op} (step ${notAsync.id}): report it in the call's 206 reply`);
  const unsupported = body.steps.find((s) => s.op !== "StepRun" && s.op !== "Step" && s.op !== "StepPlanned");
  if (unsupported) return fail(400, `cannot checkpoint opcode ${unsupported.op} (step ${unsupported.id}) with the embedded executor`);
  // Each output is serialised once: the stored result is `{"data":<output>}`, byte for byte what
  // JSON.stringify({ data }) gives.
  const results = body.steps
    .filter((s) => s.op === "StepRun" || s.op === "Step")
    .map((s) => ({ id: s.id, json: JSON.stringify(s.data ?? null) }));
  const tooBig = results.find((r) => (r.json.length > MAX_STEP_OUTPUT_BYTES / 3 ? Buffer.byteLength(r.json) : r.json.length) > MAX_STEP_OUTPUT_BYTES);
  if (tooBig) return fail(413, `Step ${tooBig.id} output is over ${MAX_STEP_OUTPUT_BYTES} bytes (Inngest's step output limit)`);

  if (checkpointHooks.beforeStore) await checkpointHooks.beforeStore(runId);
  const now = Date.now();
  const outcome = await tx(async (t) => {
    // Four statements per one-step checkpoint (BEGIN, INSERT, UPDATE, COMMIT) on the hot path, none of them reading rows
    // back (a write with RETURNING costs the native binding about 45 µs more); a refusal is classified after.
    let added = 0;
    for (const r of results) {
      // One prepared INSERT per step (a checkpoint usually carries one), in the order reported; a step stored before
      // (a repeated report) changes nothing and adds nothing.
      const result = `{"data":${r.json}}`;
      const inserted = await t.execute({
        sql: `INSERT INTO executor_steps (run_id, hashed_id, result, event_seq, created_at)
              VALUES (?1, ?2, ?3, coalesce((SELECT watermark FROM executor_runs WHERE id = ?1), 0), ?4)
              ON CONFLICT DO NOTHING`,
        args: [runId, r.id, result, now],
      });
      if (inserted.rowsAffected > 0) added += sqlTextLength(result);
    }
    // The fence, the run state limit, the run state size, a fresh retry budget (Inngest's ResetAttemptsByJobID) and the
    // history watermark (recordEntry's "step" entries) in one statement.
    const updated = await t.execute({
      sql: `UPDATE executor_runs SET attempt = 0, state_bytes = state_bytes + ?1,
              watermark = CASE WHEN ?1 > 0 THEN (SELECT coalesce(max(seq), 0) FROM executor_events) ELSE watermark END
            WHERE id = ?2 AND fn_id = ?3 AND status = 'running' AND lease_owner = ?4 AND lease_until >= ?5 AND generation = ?6
              AND state_bytes + ?1 <= ?7`,
      args: [added, runId, body.fn_id, dispatch.workerId, now, dispatch.generation, MAX_RUN_STATE_BYTES],
    });
    if (updated.rowsAffected === 0) return { refused: await classify(t, runId, body, dispatch, now) };
    checkpointStats.stored += results.length;
    return { refused: null };
  }, { rollbackIf: refusedOutcome });
  return outcome.refused ?? new Response(null, { status: 200 });
}

/**
 * Why the checkpoint's UPDATE changed nothing: no such run, another function's run, a dispatch that has moved on
 * (409), or, for the current dispatch, a run state the new steps would take past Inngest's limit (413).
 */
async function classify(
  t: Tx,
  runId: string,
  body: CheckpointBody,
  dispatch: { workerId: string; generation: number },
  now: number,
): Promise<Response> {
  const [run] = await rows<{ fn_id: string; current: number }>(
    t,
    `SELECT fn_id, (status = 'running' AND lease_owner = ? AND lease_until >= ? AND generation = ?) AS current
       FROM executor_runs WHERE id = ?`,
    [dispatch.workerId, now, dispatch.generation, runId],
  );
  if (!run) return fail(404, `Run ${runId} not found`);
  if (run.fn_id !== body.fn_id) return fail(400, `Run ${runId} belongs to function ${run.fn_id}, not ${body.fn_id}`);
  if (Number(run.current) === 1) return fail(413, `Run ${runId} state would exceed ${MAX_RUN_STATE_BYTES} bytes (Inngest's run state limit)`);
  // Not current: no longer running, another worker's lease, a lapsed lease (another worker may take it at any
  // moment), or a write has acted on a newer call since (the generation).
  checkpointStats.stale++;
  return fail(409, `Stale dispatch: run ${runId} has moved on from ${body.qi_id}`);
}

/** A surrogate pair: one character to SQLite's `length()`, two code units to JavaScript's. */
const SURROGATE_PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;

/**
 * SQLite's `length()` of a text without NUL characters (JSON text never has one: JSON.stringify escapes it): its
 * characters, which is what the run's state size has always counted for a checkpointed step (`length(result)`).
 */
export function sqlTextLength(text: string): number {
  const pairs = text.match(SURROGATE_PAIR);
  return text.length - (pairs?.length ?? 0);
}

/**
 * A `fetch` for an app's Inngest client (its `fetch` option) that handles checkpoint calls in-process, without a
 * socket, and passes everything else to `base`.
 */
export function checkpointingFetch(base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (CHECKPOINT_PATH.test(new URL(url).pathname)) {
      // The SDK sends a string body: hand it over as is (building a Request and reading its stream back costs more
      // than storing the step).
      if (typeof init?.body === "string") return handleCheckpoint(url, init.method ?? "GET", init.body);
      return handleCheckpointRequest(new Request(input, init));
    }
    return base(input, init);
  };
}

/**
 * Whether an `Authorization` header carries `key`: as the plain key, or as the SDK sends a signing key
 * (`signkey-<env>-` + sha256 of the hex-decoded key), so an app can use `INNGEST_SIGNING_KEY=signkey-dev-<key>`.
 */
export function bearerCarriesKey(header: string | null, key: string, equal: (a: string, b: string) => boolean): boolean {
  const token = header?.replace(/^Bearer\s+/i, "").trim();
  if (!token) return false;
  if (equal(token, key)) return true;
  const prefixed = /^(signkey-\w+-)(.+)$/.exec(token);
  if (!prefixed) return false;
  const hashed = createHash("sha256").update(Buffer.from(key.replace(/^signkey-\w+-/, ""), "hex")).digest("hex");
  return equal(prefixed[2]!, hashed);
}
