import { isInstanceAdmin } from "@/lib/auth/admin";
import { AppError } from "@/lib/errors";
import { route } from "@/lib/http";
import { renderMetrics } from "@/lib/ops/metrics";

export const dynamic = "force-dynamic";

/**
 * Prometheus metrics (text format) for instance administrators: scrape with an administrator's API token or
 * GATEHOUSE_ADMIN_TOKEN as the bearer. Figures of the whole instance, so never for an ordinary user.
 */
export const GET = route(async ({ user }) => {
  if (!(await isInstanceAdmin({ user }))) {
    throw new AppError("forbidden:auth", "Metrics are for instance administrators (the local owner or GATEHOUSE_ADMIN_EMAILS).");
  }
  const { contentType, body } = await renderMetrics();
  return new Response(body, { status: 200, headers: { "content-type": contentType, "cache-control": "no-store" } });
});
