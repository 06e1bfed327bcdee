import { NextResponse, type NextRequest } from "next/server";

/**
 * Pages learn which path was asked for (Server Components are not told), so that signing in returns you there.
 * Nothing else happens here: authentication and authorization are checked by each page and route handler.
 */
export function proxy(request: NextRequest) {
  const headers = new Headers(request.headers);
  headers.set("x-gatehouse-path", `${request.nextUrl.pathname}${request.nextUrl.search}`);
  return NextResponse.next({ request: { headers } });
}

export const config = { matcher: ["/((?!api/|_next/|e/|favicon.ico|signin).*)"] };
