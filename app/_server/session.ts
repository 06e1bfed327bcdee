import "server-only";
import { headers } from "next/headers";
import { redirect } from "next/navigation";
import { getUserFromHeaders, type SessionUser } from "@/lib/auth/guard";
import { requestHost, requestProto } from "@/lib/auth/request-url";

/** The signed-in user for a page, or a redirect to the sign-in page. */
export async function requirePageUser(callbackPath?: string): Promise<SessionUser> {
  const h = await headers();
  // Set by proxy.ts; only same-site paths are ever used as the target after sign-in.
  const asked = h.get("x-gatehouse-path");
  const target = callbackPath ?? (asked && asked.startsWith("/") && !asked.startsWith("//") ? asked : "/");
  const host = requestHost(h) ?? "127.0.0.1";
  const proto = requestProto(h) ?? "http";
  const user = await getUserFromHeaders(h, `${proto}://${host}`);
  if (!user) redirect(`/signin?callbackUrl=${encodeURIComponent(target)}`);
  return user;
}
