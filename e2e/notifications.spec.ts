import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test } from "@playwright/test";
import { Webhook } from "standardwebhooks";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

/** A webhook receiver on loopback: records each request; answers 503 while `down`. */
async function receiver() {
  const state = { down: false, requests: [] as Array<{ headers: Record<string, string>; body: string }> };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      state.requests.push({ headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])), body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(state.down ? 503 : 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, close: () => server.close() };
}

test("notifications: configure a signed webhook with a generated secret, send a test, see a failed delivery and redeliver it", async ({ page, request }) => {
  const hook = await receiver();
  try {
    const project = await createProject(request, "notify project");
    await signIn(page, "/projects");
    const card = page.getByTestId("project-card").filter({ hasText: "notify project" });
    await card.getByText("Notifications", { exact: true }).click();
    const webhook = card.getByTestId("channel-webhook");
    await webhook.getByLabel("Endpoint URL").fill(hook.url);
    await webhook.getByRole("button", { name: "Generate" }).click();
    const secret = await webhook.getByLabel("Signing secret (whsec_…)").inputValue();
    expect(secret).toMatch(/^whsec_/);
    await webhook.getByRole("button", { name: "Save" }).click();
    await expect(webhook.getByText("on", { exact: true })).toBeVisible();
    // Saved: the secret is gone from the page and only said to be set.
    await expect(webhook.getByLabel("Signing secret (whsec_…)")).toHaveValue("");
    await expect(webhook.getByLabel("Signing secret (whsec_…)")).toHaveAttribute("placeholder", /^set/);

    await webhook.getByRole("button", { name: "Send a test" }).click();
    await expect(webhook.getByTestId("channel-webhook-test-result")).toHaveText("Test delivered (HTTP 204)");
    expect(new Webhook(secret).verify(hook.state.requests[0]!.body, hook.state.requests[0]!.headers)).toMatchObject({ type: "decision.notify" });
    await page.screenshot({ path: `${SHOTS}/notifications-settings.png`, fullPage: true });

    // A gate opens while the endpoint is down: the delivery is retried, then shown failed in the log.
    hook.state.down = true;
    const started = await request.post("/api/runs", {
      headers: authHeaders,
      data: { projectId: project.id, request: "Notify: a note", config: { trustMode: { planning: "manual" } } },
    });
    expect(started.status()).toBe(201);
    const log = card.getByTestId("delivery-log");
    const row = log.getByTestId("delivery-row").first();
    await expect(row).toContainText("failed", { timeout: 60_000 });
    await expect(row).toContainText("the endpoint answered HTTP 503");
    await page.screenshot({ path: `${SHOTS}/notifications-failed-delivery.png`, fullPage: true });

    hook.state.down = false;
    await row.getByTestId("redeliver").click();
    await expect(row).toContainText("delivered", { timeout: 30_000 });
    const last = hook.state.requests.at(-1)!;
    expect(new Webhook(secret).verify(last.body, last.headers)).toMatchObject({ data: { reason: "opened", subject: { type: "gate" } } });
  } finally {
    hook.close();
  }
});

test("settings: a person sets their own email for notices", async ({ page }) => {
  await signIn(page, "/settings");
  const panel = page.getByTestId("personal-notifications");
  await panel.getByLabel("Email address").fill("owner.notices@example.com");
  await panel.getByRole("button", { name: "Save" }).first().click();
  await page.reload();
  await expect(page.getByTestId("personal-notifications").getByLabel("Email address")).toHaveValue("owner.notices@example.com");
});
