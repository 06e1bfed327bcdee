import crypto from "node:crypto";
import { expect, test } from "@playwright/test";
import { E2E_SLACK_SIGNING_SECRET } from "./constants";
import { signIn } from "./helpers";

/*
 * Settings → Chat accounts and "what to receive", in the browser: a link code is created and shown; sent as Slack
 * sends the slash command (form fields, signed v0 with the app's signing secret), it links a Slack account, which the
 * card then lists and can unlink. A personal channel's level (decisions / run ends / everything) is saved and is
 * still chosen after a reload.
 */

function signedSlashCommand(text: string) {
  const body = new URLSearchParams({
    token: "gIkuvaNzQIHg97ATvDxqgjtO",
    team_id: "T0E2E",
    team_domain: "example",
    channel_id: "C2147483705",
    channel_name: "approvals",
    user_id: "UE2EOWNER",
    user_name: "e2e-owner",
    command: "/gatehouse",
    text,
    api_app_id: "A123456",
    response_url: "https://hooks.slack.com/commands/1234/5678",
    trigger_id: "13345224609.738474920.8088930838d88f008e0",
  }).toString();
  const at = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${crypto.createHmac("sha256", E2E_SLACK_SIGNING_SECRET).update(`v0:${at}:${body}`).digest("hex")}`;
  return { body, headers: { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": at, "x-slack-signature": signature } };
}

test("chat accounts: a link code is shown, a signed Slack command links the account, the card lists it and unlinks it", async ({ page, request }) => {
  await signIn(page, "/settings");
  const card = page.getByTestId("chat-accounts");
  await expect(card.getByText("Chat accounts", { exact: true })).toBeVisible();
  await card.getByTestId("chat-link-create").click();
  const shown = card.getByTestId("chat-link-code");
  await expect(shown).toContainText(/\/gatehouse link \S+ in Slack/);
  const code = /\/gatehouse link (\S+)/.exec((await shown.textContent()) ?? "")![1]!;

  const { body, headers } = signedSlashCommand(`link ${code}`);
  const linked = await request.post("/api/slack/commands", { headers, data: body });
  expect(linked.status()).toBe(200);
  expect((await linked.json()).text).toMatch(/^Linked: this Slack account now acts as /);

  await page.reload();
  const accounts = page.getByTestId("chat-linked-accounts");
  await expect(accounts).toContainText("Slack e2e-owner");
  await accounts.getByRole("button", { name: "Unlink" }).click();
  await expect(page.getByTestId("chat-linked-accounts")).toHaveCount(0);
  await page.reload();
  await expect(page.getByTestId("chat-accounts")).toBeVisible();
  await expect(page.getByTestId("chat-linked-accounts")).toHaveCount(0);
});

test("what to receive: a personal channel's level (decisions, run ends, everything) is saved and still chosen after a reload", async ({ page }) => {
  await signIn(page, "/settings");
  const telegram = page.locator("form").filter({ has: page.getByLabel("Telegram chat id") });
  await expect(telegram.getByTestId("me-telegram-notices")).toHaveValue("decisions");
  await telegram.getByLabel("Telegram chat id").fill("424242");
  await telegram.getByTestId("me-telegram-notices").selectOption("everything");
  await telegram.getByRole("button", { name: "Save" }).click();
  await expect(page.getByText("Telegram chat saved")).toBeVisible();
  await page.reload();
  const again = page.locator("form").filter({ has: page.getByLabel("Telegram chat id") });
  await expect(again.getByLabel("Telegram chat id")).toHaveValue("424242");
  await expect(again.getByTestId("me-telegram-notices")).toHaveValue("everything");

  await again.getByTestId("me-telegram-notices").selectOption("run_ends");
  await again.getByRole("button", { name: "Save" }).click();
  await expect(page.getByText("Telegram chat saved").first()).toBeVisible();
  await page.reload();
  await expect(page.locator("form").filter({ has: page.getByLabel("Telegram chat id") }).getByTestId("me-telegram-notices")).toHaveValue("run_ends");
});
