import { route, json } from "@/lib/http";
import { getHealth } from "@/lib/health";
import { getUserFromHeaders } from "@/lib/auth/guard";

export const dynamic = "force-dynamic";

/**
 * Liveness for load balancers: `{ok}` for anyone. The details (database error, executor and worker ids, sandbox
 * isolation, version) only for a signed-in caller: they tell an outsider what to attack.
 */
export const GET = route({ public: true }, async ({ request }) => {
  const health = await getHealth();
  const status = health.ok ? 200 : 503;
  const user = await getUserFromHeaders(request.headers, new URL(request.url).origin);
  return json(user ? health : { ok: health.ok }, { status });
});
