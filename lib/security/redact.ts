import { secretValues } from "@/lib/env";

/**
 * Redaction pass for anything logged or stored from model output, command output or errors: known secret shapes and
 * every secret value configured in env are replaced by a marker.
 */
const PATTERNS: Array<[RegExp, string]> = [
  [/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g, "[REDACTED:private-key]"],
  [/\bsk-ant-[A-Za-z0-9_-]{16,}/g, "[REDACTED:anthropic-key]"],
  [/\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}/g, "[REDACTED:openai-key]"],
  [/\bgh[pousr]_[A-Za-z0-9]{30,}/g, "[REDACTED:github-token]"],
  [/\bgithub_pat_[A-Za-z0-9_]{30,}/g, "[REDACTED:github-token]"],
  [/\bgh_pat_[A-Za-z0-9_-]{20,}/g, "[REDACTED:gatehouse-token]"],
  [/\bAIza[0-9A-Za-z_-]{35}\b/g, "[REDACTED:google-key]"],
  [/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, "[REDACTED:aws-key]"],
  [/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, "[REDACTED:slack-token]"],
  [/\be2b_[A-Za-z0-9]{20,}/g, "[REDACTED:e2b-key]"],
  [/\bsignkey-[a-z]+-[A-Za-z0-9]{16,}/g, "[REDACTED:inngest-key]"],
  [/\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/g, "[REDACTED:jwt]"],
  // Credentials of providers we do not know by shape: bearer headers, and values assigned to secret-sounding names.
  [/\b(Bearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/-]{16,}=*/gi, "$1[REDACTED:bearer]"],
  [
    /\b([A-Za-z0-9_.-]*(?:api[_-]?key|secret|token|password|passwd|private[_-]?key)["']?\s*[:=]\s*["']?)(?!\[REDACTED)[^\s"',;}]{8,}/gi,
    "$1[REDACTED]",
  ],
];

export function redact(text: string, extraSecrets: string[] = []): string {
  let out = text;
  for (const [pattern, marker] of PATTERNS) out = out.replace(pattern, marker);
  for (const secret of [...secretValues(), ...extraSecrets]) {
    if (secret.length >= 8) out = out.split(secret).join("[REDACTED]");
  }
  return out;
}

/** Redact every string inside a JSON-like value. */
export function redactDeep<T>(value: T, extraSecrets: string[] = []): T {
  if (typeof value === "string") return redact(value, extraSecrets) as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, extraSecrets)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v, extraSecrets)])) as T;
  }
  return value;
}
