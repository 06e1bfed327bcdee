import { Auth } from "@auth/core";
import { getAuthConfig } from "@/lib/auth/config";
import { requestWithHostUrl } from "@/lib/auth/request-url";
import { errorResponse } from "@/lib/http";

export const dynamic = "force-dynamic";

// Auth.js's own endpoints (sign-in, callback, session, csrf, sign-out); they do their own CSRF checks.
async function handler(request: Request): Promise<Response> {
  try {
    return await Auth(await requestWithHostUrl(request), getAuthConfig());
  } catch (error) {
    return errorResponse(error);
  }
}

export { handler as GET, handler as POST };
