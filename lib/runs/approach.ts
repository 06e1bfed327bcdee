/*
 * "Explore N approaches" starts one request N times, each told which approach it is by a last paragraph of its request:
 * "Approach 2 of 3", or "Approach 2: <the person's hint>". Written and read here only, so the runs list can say which
 * approach a row is (the rows' titles are the same).
 */

export type Approach = { index: number; of: number | null; note: string | null };

/** The request an approach runs: the person's request and the paragraph that says which approach it is. */
export function approachRequest({ request, index, of, note }: { request: string; index: number; of: number; note?: string | null }): string {
  const hint = note?.trim();
  return `${request}\n\nApproach ${index}${hint ? `: ${hint}` : ` of ${of}`}`;
}

const LAST_PARAGRAPH = /\n\nApproach (\d+)(?: of (\d+)|: ([^\n]+))$/;

/** Which approach a run's request is, or null for a run started on its own. */
export function approachOf(request: string): Approach | null {
  const m = LAST_PARAGRAPH.exec(request);
  if (!m) return null;
  return { index: Number(m[1]), of: m[2] ? Number(m[2]) : null, note: m[3]?.trim() || null };
}

/** "approach 2 of 3", "approach 2: use a library". */
export function approachLabel(approach: Approach): string {
  return `approach ${approach.index}${approach.of ? ` of ${approach.of}` : approach.note ? `: ${approach.note}` : ""}`;
}
