import crypto from "node:crypto";
import { expect, test } from "@playwright/test";
import { E2E_GITHUB_WEBHOOK_SECRET } from "./constants";
import { authHeaders, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";
const INSTALLATION_ID = 4242;

type Listed = { configured: boolean; repositories: { installationId: number; fullName: string }[] };

test("a repository the GitHub App was installed on (signed installation webhook) is picked in the create form and bound with its installation", async ({ page, request }) => {
  // Before any installation: the empty state says what to do, and typed entry is there.
  await signIn(page);
  await page.getByRole("link", { name: "Projects" }).click();
  const form = page.getByTestId("create-project");
  await form.getByRole("radio", { name: "GitHub" }).check();
  const picker = form.getByTestId("github-repository-picker");
  await expect(picker.getByTestId("github-repositories-empty")).toContainText("Install the GitHub App on a repository, then it appears here.");
  const owner = picker.getByLabel("Owner", { exact: true });
  await expect(owner).toBeVisible();

  // The delivery GitHub sends when the app is installed on two repositories of an organisation.
  const body = JSON.stringify({
    action: "created",
    installation: { id: INSTALLATION_ID, account: { login: "e2e-org", type: "Organization" } },
    repositories: [
      { id: 880001, name: "api", full_name: "e2e-org/api", private: true },
      { id: 880002, name: "web", full_name: "e2e-org/web", private: false },
    ],
    sender: { login: "mona", id: 1 },
  });
  const delivered = await request.post("/api/github/webhook", {
    headers: {
      "content-type": "application/json",
      "x-github-event": "installation",
      "x-github-delivery": crypto.randomUUID(),
      "x-hub-signature-256": `sha256=${crypto.createHmac("sha256", E2E_GITHUB_WEBHOOK_SECRET).update(body).digest("hex")}`,
    },
    data: body,
  });
  expect(delivered.status()).toBe(202);
  // The delivery is handled by the github-webhook function on the embedded executor, after the 202.
  await expect
    .poll(async () => {
      const listed = (await (await request.get("/api/github/repositories", { headers: authHeaders })).json()) as Listed;
      return listed.repositories.filter((r) => r.installationId === INSTALLATION_ID).map((r) => r.fullName);
    })
    .toEqual(["e2e-org/api", "e2e-org/web"]);

  await page.reload();
  await form.getByLabel("Name", { exact: true }).fill("connected web");
  await form.getByRole("radio", { name: "GitHub" }).check();
  const list = picker.getByRole("radiogroup", { name: "Repositories the GitHub App is installed on" });
  await expect(list.getByRole("radio")).toHaveCount(3);
  // No GITHUB_APP_ID on the e2e server: the list still shows, with the note saying runs cannot reach GitHub yet.
  await expect(picker.getByTestId("github-not-configured")).toContainText("GitHub App not configured");
  // Typed entry is the fallback, not the default.
  await expect(owner).toHaveCount(0);

  // Submitting without a choice says what to do.
  await form.getByTestId("create-project-submit").click();
  await expect(picker).toContainText("Choose a repository, or enter one by hand.");
  // "Another repository" opens typed entry.
  await list.getByRole("radio", { name: "Another repository (enter owner and name)" }).check();
  await expect(owner).toBeVisible();

  // Keyboard: focus the first repository, arrow down to the second. Radix moves focus after the keydown and checks
  // the radio it lands on while the arrow is held, so the key is released once focus has moved, as a person would.
  await list.getByRole("radio", { name: /e2e-org\/api/ }).focus();
  const web = list.getByRole("radio", { name: /e2e-org\/web/ });
  await page.keyboard.down("ArrowDown");
  await expect(web).toBeFocused();
  await page.keyboard.up("ArrowDown");
  await expect(web).toBeChecked();
  await expect(owner).toHaveCount(0);
  await expect(picker).not.toContainText("Choose a repository, or enter one by hand.");
  await page.mouse.move(0, 0);
  await page.screenshot({ path: `${SHOTS}/github-connect.png`, fullPage: true });

  await form.getByTestId("create-project-submit").click();
  await expect(page.getByTestId("project-card").filter({ hasText: "connected web" })).toContainText("github.com/e2e-org/web");

  const projects = (await (await request.get("/api/projects", { headers: authHeaders })).json()).projects as {
    name: string;
    repository: Record<string, unknown>;
  }[];
  expect(projects.find((p) => p.name === "connected web")?.repository).toEqual({
    type: "github",
    owner: "e2e-org",
    repo: "web",
    installationId: INSTALLATION_ID,
  });
});
