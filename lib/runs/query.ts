import type { z } from "zod";
import { AppError, describeIssues } from "@/lib/errors";

/** Parse URL search parameters with a schema; a mismatch is a 400 naming the parameter. */
export function parseQuery<S extends z.ZodType>(request: Request, schema: S): z.output<S> {
  const params = Object.fromEntries(new URL(request.url).searchParams.entries());
  const parsed = schema.safeParse(params);
  if (!parsed.success) throw new AppError("bad_request:api", describeIssues(parsed.error.issues));
  return parsed.data;
}
