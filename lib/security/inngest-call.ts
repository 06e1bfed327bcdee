import { bufferedBody, discardBody, readUnverifiedBody } from "@/lib/body";
import { AppError } from "@/lib/errors";
import { MAX_RUN_STATE_BYTES } from "@/lib/executor/checkpoint";
import { parseSignatureHeader, SIGNATURE_HEADER, verifyRequestSignature } from "@/lib/executor/signing";
import { ownSigningKey } from "./executor-key";

/** A call to run a function carries the run's state: its events and step outputs, at most Inngest's 32 MiB, plus envelope. */
export const INNGEST_CALL_MAX_BYTES = MAX_RUN_STATE_BYTES + 1024 * 1024;
/** A sync's body is `{url}`. */
export const INNGEST_SYNC_MAX_BYTES = 64 * 1024;

/**
 * Admit a call to the Inngest serve endpoint (POST runs a function, PUT syncs) before the SDK sees it, and return the
 * request to hand to the SDK (its body read once, within its cap). The signature covers the body, so the body must be
 * read before it can be verified; what can be checked without it is checked first, and nothing is read then:
 * - when the SDK verifies signatures (`signed`: embedded mode, or Inngest without INNGEST_DEV), a call without
 *   X-Inngest-Signature is refused (except Inngest's unsigned PUT, the SDK's out-of-band sync trigger), and one whose
 *   header is not `t=<unix seconds>&s=<64 hex>` from the last 5 minutes (the SDK would refuse it after reading);
 * - in embedded mode a PUT must ask for an in-band sync, the only kind the executor makes (out of band the SDK would
 *   try to register with this app's own /fn/register and fail with a 500).
 * The body is then read within INNGEST_CALL_MAX_BYTES (a sync's within INNGEST_SYNC_MAX_BYTES) and the budget of
 * unverified bodies (lib/body.ts); it must be JSON. The signature over it is then verified by the SDK, once (it runs
 * signed: in embedded mode with the app's own signing key, with Inngest with INNGEST_SIGNING_KEY); only an SDK that
 * would not verify in embedded mode has it verified here.
 */
export async function admitInngestCall({ request, embedded, signed }: { request: Request; embedded: boolean; signed: boolean }): Promise<Request> {
  const header = request.headers.get(SIGNATURE_HEADER);
  const refuse = async (error: AppError): Promise<never> => {
    await discardBody(request);
    throw error;
  };
  if (signed && !header && (embedded || request.method !== "PUT")) {
    await refuse(new AppError("unauthorized:executor", "Only Gatehouse's executor may call this endpoint: its calls are signed (X-Inngest-Signature)."));
  }
  if (signed && header && !parseSignatureHeader(header)) {
    await refuse(
      new AppError("unauthorized:executor", "X-Inngest-Signature is malformed or expired: it must be t=<unix seconds>&s=<64 hex digits>, made in the last 5 minutes."),
    );
  }
  if (embedded && request.method === "PUT" && request.headers.get("x-inngest-sync-kind") !== "in_band") {
    await refuse(new AppError("bad_request:executor", "Gatehouse's own endpoint syncs only in band (X-Inngest-Sync-Kind: in_band), as its executor asks."));
  }
  const raw = await readUnverifiedBody({
    request,
    limit: request.method === "PUT" ? INNGEST_SYNC_MAX_BYTES : INNGEST_CALL_MAX_BYTES,
    surface: "executor",
    what: "The Inngest call's body",
  });
  const text = raw.toString("utf8");
  let body: unknown = "";
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      throw new AppError("bad_request:executor", "The body must be JSON, as Inngest sends it.");
    }
  }
  // The SDK verifies the signature itself whenever it runs signed (always, in embedded mode: the client is isDev: false
  // with the app's signing key), right after this and before anything of the call runs; checking it here as well
  // parsed, canonicalised and hashed every call twice. Only an unsigned SDK in embedded mode would leave it to us.
  if (embedded && !signed && !verifyRequestSignature({ body, header, signingKeys: [ownSigningKey()] })) {
    throw new AppError("unauthorized:executor", "X-Inngest-Signature does not match the body: only Gatehouse's executor may call this endpoint.");
  }
  return new Request(request.url, { method: request.method, headers: request.headers, body: bufferedBody(raw) });
}
