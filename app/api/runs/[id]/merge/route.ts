import { json, readOptionalJson, route } from "@/lib/http";
import { mergeSchema } from "@/lib/runs/gates/decide-run";
import { toRunDto } from "@/lib/runs/dto";
import { getMergePreview } from "@/lib/runs/merge-preview";
import { rateLimit } from "@/lib/security/rate-limit";
import * as decide from "@/inngest/decide";

export const dynamic = "force-dynamic";

/** What a merge would land now (every file of the squash commit, .autonomous/ records apart), before deciding it. */
export const GET = route<{ id: string }>(async ({ params, user }) => json({ preview: await getMergePreview({ user, runId: params.id }) }));

/** A person merges a completed run that was delivered without a merge (MERGE_DECIDED → PR_MERGED or MERGE_FAILED). */
export const POST = route<{ id: string }>(async ({ request, params, user }) => {
  await rateLimit({ user, bucket: "decisions" });
  const { notes } = await readOptionalJson(request, mergeSchema);
  const run = await decide.merge({ user, runId: params.id, notes });
  return json({ run: toRunDto(run) }, { status: 202 });
});
