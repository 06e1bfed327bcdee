import { describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { saveProjectChannel } from "@/lib/notifications/store";
import { launch, newProject, until, useWorkflowHarness, waitForStatus } from "./harness";
import { startHttpReceiver, webhookSecret } from "../notifications/receivers";

/*
 * Run notices through the real workflow on the embedded executor (strict: Inngest Cloud's semantics): the steps' hook
 * sends run/notice, notify-run delivers it to the channel that chose it. A run paused for an invalid plan is told with
 * what to do and its Retry / Cancel buttons; a run that completes is told with its branch and cost.
 */

const h = useWorkflowHarness();

type Notice = { title: string; text: string; reason: string; subject: { type: string; id: string }; buttons?: Array<{ label: string; code: string }> };

describe("run notices from a running workflow", () => {
  it("a webhook at everything is told when a run pauses (invalid plan) and when a run completes", async () => {
    const hook = await startHttpReceiver(() => ({ status: 204 }));
    try {
      const { project } = await newProject(h.user);
      const secret = webhookSecret();
      await saveProjectChannel({ user: h.user, projectId: project.id, kind: "webhook", input: { enabled: true, config: { url: `${hook.url}/in` }, secret, notices: "everything" } });
      const notices = () =>
        hook.requests.map((r) => (new Webhook(secret).verify(r.body, Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]))) as { data: Notice }).data);

      const paused = await launch(h.user, project.id, "Draw the plan [invalid-mermaid: 2]", { trustMode: { planning: "auto" } });
      await waitForStatus(paused.id, ["paused"]);
      const pauseNotice = await until(async () => notices().find((n) => n.subject.id === paused.id && n.reason === "paused"), "the pause notice");
      expect(pauseNotice.title).toMatch(/Run "Draw the plan.*" paused \(invalid plan\)$/);
      expect(pauseNotice.text).toContain("What to do: The planner's diagram is not valid Mermaid.");
      expect(pauseNotice.buttons?.map((b) => b.code)).toEqual([`rt:${paused.id}`, `cn:${paused.id}`]);

      const done = await launch(h.user, project.id, "Write a short note", { trustMode: { planning: "auto" } });
      await waitForStatus(done.id, ["completed"], 120_000);
      const completed = await until(async () => notices().find((n) => n.subject.id === done.id && n.reason === "completed"), "the completed notice");
      expect(completed.text).toMatch(/Branch: autonomous\/run_\w+-write-a-short-note\nCost: \$\d+\.\d+/);
      // Each notice once (a step that ran again would send the same key, planned once).
      expect(notices().filter((n) => n.subject.id === done.id)).toHaveLength(1);
    } finally {
      await hook.close();
    }
  }, 240_000);
});
