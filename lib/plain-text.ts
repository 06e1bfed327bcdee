import { z } from "zod";

/**
 * Control characters (C0, DEL, C1) and the bidirectional overrides that reorder what is shown. In a one-line name or
 * title none has a use, and each is something a terminal or a page would act on instead of showing (ESC starts the
 * sequences that clear a screen, set a window title, write the clipboard).
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Text with every control character (a line break too) turned into a space; its own spacing kept. */
export function withoutControls(text: string): string {
  return text.replace(CONTROLS, " ");
}

/** A name or title as one line of plain text: control characters become spaces, runs of white space one space, trimmed. */
export function singleLine(text: string): string {
  return withoutControls(text).replace(/\s+/g, " ").trim();
}

/** A required one-line name at an API's edge (project, token …): controls stripped, then 1..max characters. */
export function nameSchema({ max }: { max: number }) {
  return z
    .string({ error: "is required" })
    .transform(singleLine)
    .pipe(z.string().min(1, "must not be empty").max(max, `must be at most ${max} characters`));
}
