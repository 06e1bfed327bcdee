/** Compact age of a timestamp relative to `now`: 12s, 5m, 3h, 2d. */
export function formatAge(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "—";
  return formatDuration(Math.max(0, now - Date.parse(iso)));
}

/** A duration in ms as 12s, 5m 03s, 3h 04m, 2d 03h. */
export function formatDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, "0")}m`;
  const d = Math.floor(h / 24);
  return `${d}d ${String(h % 24).padStart(2, "0")}h`;
}

/** USD with enough precision for cheap model calls: $0, $0.0042, $1.23. */
export function formatUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined) return "—";
  if (usd === 0) return "$0";
  if (usd < 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1_000_000).toFixed(2)}M`;
}

export function humanize(value: string | null | undefined): string {
  return value ? value.replaceAll("_", " ") : "—";
}

/**
 * A settings object as readable lines, one per leaf: `trustMode.planning` → "manual", lists joined with commas,
 * nested objects flattened with dots. An empty object has no lines (the caller says "defaults").
 */
export function settingLines(value: Record<string, unknown>, prefix = ""): Array<{ key: string; value: string }> {
  const lines: Array<{ key: string; value: string }> = [];
  for (const [k, v] of Object.entries(value)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v)) lines.push(...settingLines(v as Record<string, unknown>, key));
    else if (Array.isArray(v)) lines.push({ key, value: v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(", ") || "none" });
    else lines.push({ key, value: v === null ? "none" : typeof v === "boolean" ? (v ? "on" : "off") : String(v) });
  }
  return lines;
}
