import { unlinkAccount } from "@/lib/chat/link";
import { json, route } from "@/lib/http";

export const dynamic = "force-dynamic";

/** Unlink one of the caller's own chat accounts. */
export const DELETE = route<{ id: string }>(async ({ params, user }) => json(await unlinkAccount({ user, id: params.id })));
