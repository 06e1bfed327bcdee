import "server-only";
import { headers } from "next/headers";
import { redirect } from "next/navigation";
import { getUserFromHeaders, type SessionUser } from "@/lib/auth/guard";

/** The signed-in user for a page, or a redirect to the sign-in page. */
export async function requirePageUser(callbackPath = "/"): Promise<SessionUser> {
  const h = await headers();
  const host = h.get("x-forwarded-host") ?? h.get("host") ?? "127.0.0.1";
  const proto = h.get("x-forwarded-proto") ?? "http";
  const user = await getUserFromHeaders(h, `${proto}://${host}`);
  if (!user) redirect(`/signin?callbackUrl=${encodeURIComponent(callbackPath)}`);
  return user;
}
