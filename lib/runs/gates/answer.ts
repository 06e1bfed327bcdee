import { z } from "zod";
import { AppError } from "@/lib/errors";
import type { clarificationRequests } from "@/lib/db/schema";
import { redactBase64File } from "@/lib/redact";
import { redacted } from "./decide";

/*
 * An answer to a question, typed as the question asks it (text, chosen options, a file): a clarification's answer, or
 * the typed response of an escalated question approved at its gate.
 */

export type ClarificationRow = typeof clarificationRequests.$inferSelect;

const MAX_UPLOAD_BYTES = 256 * 1024;

export const responseSchema = z.union(
    [
      z.string().trim().min(1, "must not be empty").max(20_000),
      z.array(z.string().max(1_000)).min(1, "choose at least one option").max(50),
      z.strictObject({
        fileName: z.string().trim().min(1).max(255),
        contentBase64: z
          .string()
          .max(Math.ceil((MAX_UPLOAD_BYTES * 4) / 3) + 4, `must be at most ${MAX_UPLOAD_BYTES} bytes`)
          // Buffer.from(…, "base64") silently skips anything that is not base64: refuse it instead of storing garbage.
          .regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/, "must be base64 (A-Z a-z 0-9 + /, padded with =)"),
        contentType: z.string().max(200).optional(),
      }),
    ],
    { error: "must be text, a list of chosen options, or a file {fileName, contentBase64}" },
  );

export const answerSchema = z.strictObject({ response: responseSchema });

export type Answer = z.output<typeof responseSchema>;

/** An answer as it may be stored and shown to a model: redacted, an uploaded file in its decoded text (re-encoded). */
export function redactAnswer(response: z.output<typeof answerSchema>["response"]): z.output<typeof answerSchema>["response"] {
  if (typeof response === "object" && !Array.isArray(response)) {
    return { ...redacted(response), contentBase64: redactBase64File(response.contentBase64) };
  }
  return redacted(response);
}

/** Check an answer against the question's response type and options. */
export function checkAnswer(
  clarification: Pick<ClarificationRow, "responseType" | "options">,
  response: z.output<typeof answerSchema>["response"],
): void {
  const options = clarification.options ?? [];
  switch (clarification.responseType) {
    case "text":
      if (typeof response !== "string") throw new AppError("bad_request:clarification", "response: this question takes text.");
      return;
    case "single_choice":
      if (typeof response !== "string" || !options.includes(response)) {
        throw new AppError("bad_request:clarification", `response: choose one of: ${options.join(", ")}.`);
      }
      return;
    case "multiple_choice":
      if (!Array.isArray(response) || response.some((r) => !options.includes(r)) || new Set(response).size !== response.length) {
        throw new AppError("bad_request:clarification", `response: choose one or more distinct options of: ${options.join(", ")}.`);
      }
      return;
    case "file":
      if (typeof response !== "object" || Array.isArray(response)) {
        throw new AppError("bad_request:clarification", "response: this question takes a file {fileName, contentBase64}.");
      }
      return;
    default:
      throw new AppError("bad_request:clarification", `Unknown response type ${clarification.responseType}.`);
  }
}
