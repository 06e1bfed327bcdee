import crypto from "node:crypto";
import { monotonicFactory, ulid as ulidAt } from "ulid";

/**
 * ulid's own generator asks the OS for one random byte per character (16 calls per id, a measurable share of every
 * event append). This one draws the same cryptographic bytes from a pool refilled 4 KiB at a time.
 */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
export function pooledRandom(): number {
  if (poolAt >= pool.length) {
    crypto.randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++]! / 256;
}

const ulid = monotonicFactory(pooledRandom);

/** A plain (not prefixed, upper-case) ULID from the pooled generator. */
export function newUlid(): string {
  return ulidAt(undefined, pooledRandom);
}

/**
 * Whether a run id could start a secret's shape in its branch name (`autonomous/<run id>-<slug>`): an id ending in `sk`
 * after a digit makes `…3sk-add-a-greeting…` read as an OpenAI key (`sk-` and 16 more), so the redaction every stored
 * event passes through rewrote the branch the run had just created, and the run failed ("Branch … does not exist"),
 * about once in 3,300 runs. No other shape fits: the ids are lower-case Crockford base32 (no `o`, no `_`).
 */
export function runIdStartsASecret(id: string): boolean {
  return /sk$/.test(id);
}

/** Time-sortable, URL-safe ids: `run_01JD…`. Lower-case so they read well in branch names. */
export function newId(prefix: "run" | "evt" | "prj" | "gate" | "clr" | "art" | "mc" | "tok" | "usr" | "inv" | "grp" | "chk" | "nch" | "ntf" | "mcp"): string {
  for (;;) {
    const id = `${prefix}_${ulid().toLowerCase()}`;
    if (prefix !== "run" || !runIdStartsASecret(id)) return id;
  }
}

/**
 * The same id every time for the same `key` (and time): for work that must happen once per outside event, such as the
 * run a webhook delivery starts, so a retried step finds what it created instead of creating it again.
 */
export function stableId(prefix: "run", { key, time }: { key: string; time: number }): string {
  for (let n = 0; ; n++) {
    const bytes = crypto.createHash("sha256").update(n ? `${key}#${n}` : key).digest();
    let i = 0;
    const id = `${prefix}_${ulidAt(time, () => bytes[i++ % bytes.length]! / 256).toLowerCase()}`;
    if (!runIdStartsASecret(id)) return id;
  }
}

/**
 * The demo model's instruction markers (lib/ai/demo/instructions.ts), left out of a branch's slug. Only these, in their
 * own lower case: a redaction marker such as `[REDACTED:github-token]` stays, so a branch says a secret was there.
 */
const DEMO_MARKER = /\[(?:plan-ask|ask|ask-multi|ask-file|run|check|verify|debug|replan|scope|fail-validation|invalid-mermaid):[^\]\n]*\]/g;

/**
 * The slug of a run's branch: the words of its request without fenced blocks (```file:…```) and bracketed markers
 * ([ask: …], [run: …], [fail-validation: 1] …, the demo model's instructions), cut at a word boundary so no word is
 * left half. Only new runs use it: a run's branch name is computed once, when the run is created, and stored.
 */
export function requestSlug(request: string, maxLength = 40): string {
  const words = request
    .replace(/^[ \t]*(`{3,}|~{3,})[^\n]*\n[\s\S]*?^[ \t]*\1[ \t]*$/gm, " ")
    .replace(DEMO_MARKER, " ");
  const slug = slugify(words, Number.MAX_SAFE_INTEGER);
  if (slug.length <= maxLength) return slug;
  const head = slug.slice(0, maxLength + 1);
  const boundary = head.lastIndexOf("-");
  return boundary > 0 ? head.slice(0, boundary) : slug.slice(0, maxLength);
}

/** A short slug from free text, for branch and file names. */
export function slugify(text: string, maxLength = 40): string {
  const slug = text
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, maxLength)
    .replace(/-+$/g, "");
  return slug || "request";
}
