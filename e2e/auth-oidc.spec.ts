import { expect, test, type Page } from "@playwright/test";
import { E2E_PORT } from "./constants";
import { authHeaders, createProject } from "./helpers";
import { startOidcProvider } from "./oidc";
import { OIDC_USER } from "./oidc-constants";

const appOrigin = `http://127.0.0.1:${E2E_PORT}`;
let oidc: { close: () => Promise<void> };

test.beforeAll(async () => {
  oidc = await startOidcProvider({ appOrigin });
});

test.afterAll(async () => {
  await oidc?.close();
});

/** The provider's own login and consent pages (a new browser context has no provider session). */
async function loginAtProvider(page: Page) {
  await expect(page.getByRole("button", { name: "Sign-in" })).toBeVisible();
  expect(new URL(page.url()).port).not.toBe(String(E2E_PORT));
  await page.locator('input[name="login"]').fill("ada");
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Continue" }).click();
}

test("a person signs in through a real OIDC provider, sees nothing until they accept an invitation to a project, then sees it as a viewer", async ({
  page,
  request,
}) => {
  // The full authorization-code flow: our sign-in page → the provider's login and consent → our callback.
  await page.goto("/");
  await expect(page).toHaveURL(/\/signin/);
  await page.getByTestId("sign-in-oidc").click();
  await loginAtProvider(page);

  // Back on the dashboard as that user — a new user, member of nothing.
  await expect(page.getByTestId("current-user")).toHaveText(OIDC_USER.name);
  await expect(page.getByRole("heading", { name: "Runs" })).toBeVisible();
  const before = await page.request.get("/api/runs");
  expect(before.status()).toBe(200);
  expect((await before.json()).runs).toEqual([]);

  // The owner invites them to a project as a viewer (by the email the provider vouched for) and starts a run.
  const project = await createProject(request, "oidc project");
  const added = await request.post(`/api/projects/${project.id}/members`, {
    headers: authHeaders,
    data: { email: OIDC_USER.email, role: "viewer" },
  });
  expect(added.status()).toBe(202);
  expect((await added.json()).invitation).toEqual({ email: OIDC_USER.email.toLowerCase(), role: "viewer", status: "pending" });
  const created = await request.post("/api/runs", {
    headers: authHeaders,
    data: { projectId: project.id, request: "OIDC e2e: visible to the viewer" },
  });
  expect(created.status()).toBe(201);
  const runId = (await created.json()).run.id as string;

  // Invited is not a member: nothing shows until they accept, in the browser.
  await page.reload();
  await expect(page.getByRole("heading", { name: "Runs" })).toBeVisible();
  await expect(page.getByTestId("run-row").filter({ hasText: "OIDC e2e: visible to the viewer" })).toHaveCount(0);
  await page.goto("/projects");
  const invitation = page.getByTestId("invitation").filter({ hasText: "oidc project" });
  await expect(invitation).toContainText("as viewer");
  await invitation.getByRole("button", { name: "Accept" }).click();
  await expect(page.getByTestId("project-card").filter({ hasText: "oidc project" })).toBeVisible();
  await expect(page.getByTestId("my-invitations")).toHaveCount(0);

  await page.goto("/");
  await expect(page.getByTestId("run-row").filter({ hasText: "OIDC e2e: visible to the viewer" })).toBeVisible();

  // With the browser's session cookie: a viewer may not decide (403), and a cross-site POST is refused outright.
  const decide = await page.request.post(`/api/runs/${runId}/cancel`, { headers: { origin: appOrigin }, data: {} });
  expect(decide.status()).toBe(403);
  expect((await decide.json()).error.code).toBe("forbidden:auth");
  const crossSite = await page.request.post(`/api/runs/${runId}/cancel`, { headers: { origin: "https://evil.example" }, data: {} });
  expect(crossSite.status()).toBe(403);
  expect((await crossSite.json()).error.message).toMatch(/Cross-site/);

  // Sign out: the session is gone.
  await page.getByTestId("sign-out").click();
  await expect(page).toHaveURL(/\/signin/);
  expect((await page.request.get("/api/runs")).status()).toBe(401);
});

test("settings: an API token is shown once, works as a bearer token, and stops working when revoked", async ({ page }) => {
  await page.goto("/signin");
  await page.getByTestId("sign-in-oidc").click();
  await loginAtProvider(page);
  await expect(page.getByTestId("current-user")).toHaveText(OIDC_USER.name);

  await page.goto("/settings");
  await page.getByLabel("Name").fill("e2e script");
  await page.getByTestId("create-token").click();
  const token = (await page.getByTestId("new-token-value").textContent())!.trim();
  expect(token).toMatch(/^gatehouse_api_/);

  const me = await page.request.get("/api/tokens", { headers: { authorization: `Bearer ${token}` } });
  expect(me.status()).toBe(200);
  expect(JSON.stringify(await me.json())).not.toContain(token);

  await page.reload();
  await expect(page.getByTestId("new-token")).toHaveCount(0);
  await page.getByTestId("token-row").filter({ hasText: "e2e script" }).getByTestId("revoke-token").click();
  await expect(page.getByTestId("token-row").filter({ hasText: "e2e script" })).toContainText("revoked");
  expect((await page.request.get("/api/tokens", { headers: { authorization: `Bearer ${token}` } })).status()).toBe(401);
});
