import { z } from "zod";
import { json, route } from "@/lib/http";
import { parseQuery } from "@/lib/runs/query";
import { costsForRuns } from "@/lib/dashboard/costs";

export const dynamic = "force-dynamic";

const schema = z.strictObject({
  ids: z
    .string({ error: "is required: comma-separated run ids" })
    .transform((v) => [...new Set(v.split(",").filter(Boolean))])
    .pipe(z.array(z.string().max(100)).max(200, "at most 200 run ids")),
});

/** Model cost per run for a page of the runs list: {costs: {[runId]: {usd, tokensIn, tokensOut, calls}}}; invisible runs are absent. */
export const GET = route(async ({ request, user }) => {
  const { ids } = parseQuery(request, schema);
  return json({ costs: await costsForRuns({ user, runIds: ids }) });
});
