import { secretValues } from "@/lib/env";

/**
 * Redaction pass for anything logged, stored, committed or sent to a model: known secret shapes (even when nobody
 * configured them) and every secret value configured in env — also a prefix of 8 characters or more of one (a title
 * cut at 80 characters used to leak 34 of 36), and its base64, base64url and URL-encoded forms.
 */
/**
 * A bare AWS secret access key: exactly 40 characters of `A-Za-z0-9/+`, with none of those (nor `=`) right before or
 * after it. Such runs are also git shas (40 hex digits) and the like, so a run counts only when it mixes upper case,
 * lower case and digits — a hex sha never has upper case; a random 40-character key lacks one of the three about
 * once in a thousand. A path (`src/…`) rarely has digits in all of it and exactly 40 characters without a dot.
 */
const AWS_SECRET_KEY_RUN = /(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g;

function isAwsSecretKey(run: string): boolean {
  return /[A-Z]/.test(run) && /[a-z]/.test(run) && /[0-9]/.test(run);
}

/*
 * A key glued to what precedes it is still a key (`x_sk-ant-…`, `1ghp_…`, `KEY=AKIA…`): the distinctive prefixes match
 * anywhere; the short generic ones (`sk-`, `gh?_`, `AIza`, `eyJ`) anywhere but right after a letter, so words such as
 * `task-…` or `laughs_…` are left alone. (Issue #29, finding 7.)
 */
const PATTERNS: Array<[RegExp, string | ((match: string) => string)]> = [
  [/-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)/g, "[REDACTED:private-key]"],
  [/sk-ant-[A-Za-z0-9_-]{12,}/g, "[REDACTED:anthropic-key]"],
  [/sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{16,}/g, "[REDACTED:openai-key]"],
  [/(?<![A-Za-z])sk-[A-Za-z0-9_-]{16,}/g, "[REDACTED:openai-key]"],
  [/(?<![A-Za-z])gh[pousr]_[A-Za-z0-9]{16,}/g, "[REDACTED:github-token]"],
  [/github_pat_[A-Za-z0-9_]{16,}/g, "[REDACTED:github-token]"],
  [/gh_pat_[A-Za-z0-9_-]{16,}/g, "[REDACTED:gatehouse-token]"],
  [/gatehouse_api_[A-Za-z0-9_-]{16,}/g, "[REDACTED:gatehouse-token]"],
  [/(?<![A-Za-z])AIza[0-9A-Za-z_-]{35}\b/g, "[REDACTED:google-key]"],
  [/(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, "[REDACTED:aws-key]"],
  [/xox[abprs]-[A-Za-z0-9-]{10,}/g, "[REDACTED:slack-token]"],
  [/e2b_[A-Za-z0-9]{20,}/g, "[REDACTED:e2b-key]"],
  [/signkey-[a-z]+-[A-Za-z0-9]{16,}/g, "[REDACTED:inngest-key]"],
  [/(?<![A-Za-z])eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/g, "[REDACTED:jwt]"],
  // An AWS secret access key has no prefix: 40 characters of base64's alphabet, alone (see AWS_SECRET_KEY_RUN).
  [AWS_SECRET_KEY_RUN, (m) => (isAwsSecretKey(m) ? "[REDACTED:aws-secret-key]" : m)],
  // Credentials of providers we do not know by shape: bearer headers, and values assigned to secret-sounding names.
  [/\b(Bearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/-]{16,}=*/gi, "$1[REDACTED:bearer]"],
  [
    /\b([A-Za-z0-9_.-]*(?:api[_-]?key|secret|token|password|passwd|private[_-]?key)["']?\s*[:=]\s*["']?)(?!\[REDACTED)[^\s"',;}]{8,}/gi,
    "$1[REDACTED]",
  ],
];

/**
 * What every pattern above needs somewhere in the text (a superset, case-insensitive): a text without any of these
 * cannot match one, so the patterns' replaces are skipped for it (most text the run log stores). The bare AWS secret
 * key has no prefix, so it is looked for apart (AWS_SECRET_KEY_RUN).
 */
const MAY_MATCH_A_PATTERN = /-----BEGIN|sk-|gh[pousr]_|github_pat_|gh_pat_|gatehouse_api_|AIza|AKIA|ASIA|xox[abprs]-|e2b_|signkey-|eyJ|bearer|api[_-]?key|secret|token|password|passwd|private[_-]?key/i;

/** The shortest piece of a configured secret that is redacted wherever it appears (prefixes included). */
export const MIN_SECRET_FRAGMENT = 8;
/**
 * Prefixes are matched only for secrets at least this long. A short value's 8-character prefix is often an ordinary
 * word ("scripted" of "scripted-key") and would mangle model ids and text; short values are matched whole.
 */
export const MIN_PREFIX_MATCHED_SECRET = 16;

/**
 * Every form a secret can take in text: itself, URL-encoded, and the part of its base64 / base64url encoding that does
 * not depend on what surrounds it (three alignments inside a longer base64 text).
 */
function encodedForms(secret: string): string[] {
  const forms = new Set<string>([secret, encodeURIComponent(secret), encodeURIComponent(secret).replace(/%20/g, "+")]);
  const bytes = Buffer.from(secret, "utf8");
  for (let offset = 0; offset < 3; offset++) {
    const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
    const b64 = padded.toString("base64").replace(/=+$/, "");
    // Drop the characters that mix in the padding before, and the last (partial) character.
    const start = offset === 0 ? 0 : Math.ceil((offset * 8) / 6);
    const stable = b64.slice(start, Math.floor((padded.length * 8) / 6));
    if (stable.length >= MIN_SECRET_FRAGMENT) {
      forms.add(stable);
      forms.add(stable.replace(/\+/g, "-").replace(/\//g, "_"));
    }
  }
  return [...forms].filter((f) => f.length >= MIN_SECRET_FRAGMENT);
}

const formsCache = new Map<string, string[]>();

function formsOf(secret: string): string[] {
  let forms = formsCache.get(secret);
  if (!forms) {
    forms = encodedForms(secret);
    if (formsCache.size > 200) formsCache.clear();
    formsCache.set(secret, forms);
  }
  return forms;
}

/** Replace every run of text that equals a prefix (≥ `min` chars) of `needle`. */
function redactPrefixes(text: string, needle: string, min: number): string {
  const head = needle.slice(0, min);
  let at = text.indexOf(head);
  if (at === -1) return text;
  let out = "";
  let last = 0;
  while (at !== -1) {
    let length = min;
    while (length < needle.length && at + length < text.length && text[at + length] === needle[length]) length++;
    out += text.slice(last, at) + "[REDACTED]";
    last = at + length;
    at = text.indexOf(head, last);
  }
  return out + text.slice(last);
}

function mayHoldAwsSecretKey(text: string): boolean {
  for (const m of text.matchAll(AWS_SECRET_KEY_RUN)) if (isAwsSecretKey(m[0])) return true;
  return false;
}

/** The key shapes that identify a credential on their own (not the name-based guesses after them). */
const CONFIDENT_PATTERNS = PATTERNS.length - 2;

export function redact(text: string, extraSecrets: string[] = [], { confidentOnly = false }: { confidentOnly?: boolean } = {}): string {
  let out = text;
  if (MAY_MATCH_A_PATTERN.test(text) || mayHoldAwsSecretKey(text)) {
    for (const [pattern, marker] of confidentOnly ? PATTERNS.slice(0, CONFIDENT_PATTERNS) : PATTERNS) {
      out = typeof marker === "string" ? out.replace(pattern, marker) : out.replace(pattern, marker);
    }
  }
  for (const secret of extraSecrets.length ? [...secretValues(), ...extraSecrets] : secretValues()) {
    if (secret.length < MIN_SECRET_FRAGMENT) continue;
    for (const form of formsOf(secret)) {
      out = redactPrefixes(out, form, secret.length >= MIN_PREFIX_MATCHED_SECRET ? MIN_SECRET_FRAGMENT : form.length);
    }
  }
  return out;
}

/** Whether `text` holds a secret (a configured one, a fragment or encoding of one, or a known key shape). */
export function containsSecret(text: string, extraSecrets: string[] = []): boolean {
  return redact(text, extraSecrets) !== text;
}

/**
 * Whether `text` certainly holds a secret: a configured one (or a fragment or encoding of it) or a known key shape.
 * Unlike containsSecret it ignores the name-based guesses (`token = …`, `Bearer …`), which ordinary code matches; used
 * where a match stops work (a commit, a command), so it must not fire on `$last_update_token = "…"`.
 */
export function holdsSecret(text: string, extraSecrets: string[] = []): boolean {
  return redact(text, extraSecrets, { confidentOnly: true }) !== text;
}

/** Redact every string inside a JSON-like value (object keys included). */
export function redactDeep<T>(value: T, extraSecrets: string[] = []): T {
  if (typeof value === "string") return redact(value, extraSecrets) as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, extraSecrets)) as T;
  if (value && typeof value === "object" && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k, extraSecrets), redactDeep(v, extraSecrets)])) as T;
  }
  return value;
}

/** A base64 file (an uploaded answer): its decoded text redacted, re-encoded. Binary content passes unchanged. */
export function redactBase64File(contentBase64: string): string {
  const bytes = Buffer.from(contentBase64, "base64");
  const text = bytes.toString("utf8");
  if (Buffer.from(text, "utf8").equals(bytes)) {
    const clean = redact(text);
    if (clean !== text) return Buffer.from(clean, "utf8").toString("base64");
  }
  return redact(contentBase64) === contentBase64 ? contentBase64 : Buffer.from(redact(text), "utf8").toString("base64");
}
