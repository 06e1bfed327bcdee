import { resumeHandler } from "../resume/handler";

export const dynamic = "force-dynamic";

/** Give a run paused by a stage timeout more time: it goes on where it stopped (409 for a run paused otherwise). */
export const POST = resumeHandler("extend");
