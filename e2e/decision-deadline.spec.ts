import { expect, test, type APIRequestContext } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run.id as string;
}

/** Seconds left as the countdown shows them ("1m 59s", "45s"). */
function seconds(text: string): number {
  const m = /^(?:(\d+)m )?(\d+)s$/.exec(text.trim());
  if (!m) throw new Error(`not a countdown under an hour: ${text}`);
  return Number(m[1] ?? 0) * 60 + Number(m[2]);
}

test("a plan gate with a 2-minute deadline counts down on its card and says who it escalates to", async ({ page, request }) => {
  const project = await createProject(request, "deadline gate");
  const runId = await startRun(request, project.id, "Deadline countdown", {
    trustMode: { planning: "manual" },
    deadlines: { plan: { after: "2m", remind: ["1m"], onTimeout: { action: "escalate", to: { role: "owner" } } } },
  });
  // The browser's clock is Playwright's: moved on below instead of waiting (the server's deadline is untouched).
  await page.clock.install();
  await signIn(page);
  await page.goto(`/runs/${runId}`);

  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  const countdown = card.getByTestId("deadline-countdown");
  await expect(countdown).toHaveAttribute("data-state", "running");
  await expect(countdown).toContainText("then it escalates to the project's owners");
  const first = seconds(await countdown.getByTestId("deadline-left").innerText());
  expect(first).toBeGreaterThan(60);
  expect(first).toBeLessThanOrEqual(120);
  await page.screenshot({ path: `${SHOTS}/deadline-countdown-gate.png`, fullPage: true });

  // It counts down: a minute later it shows a minute less.
  await page.clock.fastForward("01:00");
  await expect.poll(async () => seconds(await countdown.getByTestId("deadline-left").innerText())).toBeLessThanOrEqual(first - 59);
  // Past the deadline (on the browser's clock): it says what happens now.
  await page.clock.fastForward("01:30");
  await expect(countdown).toHaveAttribute("data-state", "passed");
  await expect(countdown).toContainText("The deadline has passed; it escalates to the project's owners");
});

test("a question with a declared default shows the countdown and the default that applies", async ({ page, request }) => {
  const project = await createProject(request, "deadline question");
  const runId = await startRun(request, project.id, "Greeting [ask: Which language? | English | French]", {
    trustMode: { planning: "auto" },
    deadlines: { clarification: { after: "1h", onTimeout: { action: "default", answer: "French" } } },
  });
  await signIn(page);
  await page.goto(`/runs/${runId}`);
  const form = page.getByTestId("clarification-form");
  await expect(form).toBeVisible({ timeout: 60_000 });
  const countdown = form.getByTestId("deadline-countdown");
  await expect(countdown).toHaveAttribute("data-state", "running");
  await expect(countdown).toContainText("then the default applies: “French”");
  await expect(countdown.getByTestId("deadline-left")).toHaveText(/^(59m \d\ds|1h 00m)$/);
  await page.screenshot({ path: `${SHOTS}/deadline-countdown-question.png`, fullPage: true });

  // The inbox row shows the same deadline, counting down.
  await page.goto("/inbox");
  // Earlier specs on this server asked the same question: this run's row is the one that names its run.
  const row = page.locator('[data-testid="inbox-item"][data-item-id^="clr_"]').filter({ hasText: "Which language?" }).filter({ has: page.locator(`a[href*="${runId}"]`) });
  await expect(row).toBeVisible({ timeout: 30_000 });
  const due = row.getByTestId("inbox-item-deadline");
  await expect(due).toHaveAttribute("data-state", "running");
  await expect(due).toHaveText(/^Due in (59m \d\ds|1h 00m)$/);
  await page.screenshot({ path: `${SHOTS}/inbox-deadline.png`, fullPage: true });
});
