import { resumeHandler } from "./handler";

export const dynamic = "force-dynamic";

/** Resume a paused run where it stopped (the same as /retry; named for runs a person paused). */
export const POST = resumeHandler("retry");
