import { route, json } from "@/lib/http";
import { getHealth } from "@/lib/health";

export const dynamic = "force-dynamic";

export const GET = route({ public: true }, async () => {
  const health = await getHealth();
  return json(health, { status: health.ok ? 200 : 503 });
});
