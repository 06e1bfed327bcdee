import { z } from "zod";
import { json, readJson, route } from "@/lib/http";
import { MermaidError, MermaidTooComplexError, validateMermaid } from "@/lib/mermaid";

export const dynamic = "force-dynamic";

const schema = z.strictObject({ source: z.string({ error: "is required" }).max(100_000, "must be at most 100000 characters") });

/**
 * Validate a Mermaid diagram with mermaid's own grammar (the plan editor's live check): 200 either way, with the line.
 * A diagram over Gatehouse's limits, or whose parse runs out of time, is a 422 (unprocessable:mermaid) saying which.
 */
export const POST = route(async ({ request }) => {
  const { source } = await readJson(request, schema);
  if (!source.trim()) return json({ valid: false, error: { message: "The diagram is empty.", line: null } });
  try {
    const { kind } = await validateMermaid(source);
    return json({ valid: true, kind });
  } catch (error) {
    if (error instanceof MermaidError && !(error instanceof MermaidTooComplexError)) {
      return json({ valid: false, error: { message: error.message, line: error.line ?? null } });
    }
    throw error;
  }
});
