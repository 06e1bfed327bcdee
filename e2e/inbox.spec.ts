import { expect, test, type APIRequestContext } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

async function unread(request: APIRequestContext): Promise<number> {
  return ((await (await request.get("/api/inbox", { headers: authHeaders })).json()) as { unread: number }).unread;
}

test("the inbox: a gate that opens reaches the badge and the list over the stream; mark read; decided → done", async ({ page, request }) => {
  const project = await createProject(request, "inbox");
  await signIn(page, "/inbox");
  await expect(page).toHaveURL(/\/inbox$/);
  // The navigation's stream has sent its first snapshot.
  await expect(page.getByTestId("nav-inbox")).toHaveAttribute("data-live", "true", { timeout: 30_000 });
  const before = await unread(request);

  const started = await request.post("/api/runs", {
    headers: authHeaders,
    data: { projectId: project.id, request: "Inbox: write a note", config: { trustMode: { planning: "manual" } } },
  });
  expect(started.status()).toBe(201);
  const runId = ((await started.json()).run as { id: string }).id;
  const pendingGate = async () => {
    const detail = (await (await request.get(`/api/runs/${runId}`, { headers: authHeaders })).json()) as { gates: Array<{ id: string; status: string }> };
    return detail.gates.find((g) => g.status === "pending")?.id ?? null;
  };
  await expect.poll(pendingGate, { timeout: 60_000 }).not.toBeNull();
  const gateId = (await pendingGate())!;

  // No reload: the stream brings the new gate to the badge and to the list.
  const row = page.locator(`[data-testid="inbox-item"][data-item-id="${gateId}"]`);
  await expect(row).toBeVisible({ timeout: 30_000 });
  await expect(row).toHaveAttribute("data-read", "false");
  await expect(row).toContainText("Inbox: write a note");
  await expect(row.getByTestId("inbox-item-state")).toHaveText("New");
  await expect(page.getByTestId("inbox-count")).toHaveText(String(before + 1), { timeout: 30_000 });
  // The list shows it: no toast on the inbox page itself.
  await expect(page.getByTestId("inbox-toast")).toHaveCount(0);
  await page.screenshot({ path: `${SHOTS}/inbox.png`, fullPage: true });

  // Mark read: the row and the badge follow, and it is still read after a reload (stored, not in the page).
  await row.getByTestId("inbox-mark-read").click();
  await expect(row).toHaveAttribute("data-read", "true");
  await expect(row.getByTestId("inbox-item-state")).toHaveText("Read");
  await expect.poll(() => unread(request)).toBe(before);
  if (before === 0) await expect(page.getByTestId("inbox-count")).toHaveCount(0, { timeout: 30_000 });
  else await expect(page.getByTestId("inbox-count")).toHaveText(String(before), { timeout: 30_000 });
  await page.reload();
  await expect(row).toHaveAttribute("data-read", "true");
  await page.getByTestId("inbox-filter-unread").click();
  await expect(row).toHaveCount(0);
  await page.getByTestId("inbox-filter-open").click();

  // The row links to the gate's card on the run page; deciding it there makes it done in the inbox.
  await row.getByTestId("inbox-item-link").click();
  await expect(page).toHaveURL(new RegExp(`/runs/${runId}#gate-${gateId}$`));
  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 30_000 });
  await card.getByTestId("approve").click();
  await expect(page.getByTestId("run-view")).not.toHaveAttribute("data-status", "awaiting_approval", { timeout: 60_000 });

  await page.getByTestId("nav-inbox").click();
  await expect(page).toHaveURL(/\/inbox$/);
  await expect(row).toHaveCount(0);
  await page.getByTestId("inbox-filter-done").click();
  await expect(page).toHaveURL(/\/inbox\?filter=done$/);
  await expect(row).toBeVisible();
  await expect(row).toHaveAttribute("data-done", "true");
  await expect(row.getByTestId("inbox-item-state")).toHaveText("Decided");
  await page.screenshot({ path: `${SHOTS}/inbox-done.png`, fullPage: true });
});
