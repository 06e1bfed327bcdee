import { harness } from "./harness";

/** The parallel wake-up suite again, with the app checkpointing its steps (fn_id/qi_id sent, steps reported to /v1/checkpoint). */
harness.mode = "checkpointed";
await import("./parallel-wake.test");
