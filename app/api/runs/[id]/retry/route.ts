import { resumeHandler } from "../resume/handler";

export const dynamic = "force-dynamic";

/** Retry a paused run (after a model outage or a failure) where it stopped. */
export const POST = resumeHandler("retry");
