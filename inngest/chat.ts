import type { ChatDeciders } from "@/lib/chat/actions";
import { startRun } from "@/lib/runs/service";
import { rateLimit } from "@/lib/security/rate-limit";
import { announce } from "./announce";
import * as decide from "./decide";
import { runStarted } from "./events";

/**
 * What a press in Slack or Telegram calls: the routes' own decision functions (stored, then announced), rate-limited
 * per user as the routes are, and the run start as POST /api/runs does it.
 */
export const chatDeciders: ChatDeciders = {
  approve: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.approve(a)),
  reject: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.reject(a)),
  askBack: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.askBack(a)),
  fix: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.fix(a)),
  answer: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.answer(a)),
  resume: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.resume(a)),
  cancel: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.cancel(a)),
  budget: async (a) => (await rateLimit({ user: a.user, bucket: "decisions" }), decide.budget(a)),
  startRun: async ({ user, projectId, request }) => {
    await rateLimit({ user, bucket: "runs" });
    const run = await startRun({ user, projectId, request });
    await announce(runStarted.create({ runId: run.id }));
    return run;
  },
};
