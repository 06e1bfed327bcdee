import { expect, test } from "@playwright/test";
import { E2E_ADMIN_PASSWORD } from "./constants";
import { authHeaders, createProject, signIn } from "./helpers";

test("the built app starts and the runs page renders in Chromium after signing in", async ({ page, request }) => {
  const health = await request.get("/api/health", { headers: authHeaders });
  expect(health.status()).toBe(200);
  expect(await health.json()).toMatchObject({ ok: true, db: { ok: true } });

  const project = await createProject(request);
  const created = await request.post("/api/runs", {
    headers: authHeaders,
    data: { projectId: project.id, request: "Smoke test: write a hello file" },
  });
  expect(created.status()).toBe(201);

  await signIn(page);
  await expect(page.getByRole("heading", { name: "Runs" })).toBeVisible();
  await expect(page.getByTestId("run-row").filter({ hasText: "Smoke test: write a hello file" })).toBeVisible();
  await page.screenshot({ path: "e2e/.artifacts/screenshots/smoke-runs-list.png", fullPage: true });
});

test("an unauthenticated API call gets a typed 401", async ({ request }) => {
  const response = await request.get("/api/runs");
  expect(response.status()).toBe(401);
  expect(await response.json()).toMatchObject({ error: { code: "unauthorized:auth" } });
});

test("signing in returns you to the page you asked for", async ({ page }) => {
  await page.goto("/projects?from=link");
  await expect(page).toHaveURL(/\/signin\?callbackUrl=%2Fprojects%3Ffrom%3Dlink/);
  await page.getByLabel("Password").fill(E2E_ADMIN_PASSWORD);
  await page.getByTestId("sign-in").click();
  await expect(page).toHaveURL(/\/projects\?from=link$/);
  await expect(page.getByTestId("current-user")).toBeVisible();
});

test("pages name the app's icons and public/ serves them (no favicon 404)", async ({ page, request }) => {
  const failed: string[] = [];
  page.on("response", (r) => {
    if (r.status() === 404) failed.push(r.url());
  });
  await page.goto("/signin");
  await expect(page.locator('link[rel="icon"][href="/icon.svg"]')).toHaveCount(1);
  await expect(page.locator('link[rel="apple-touch-icon"][href="/apple-touch-icon.png"][sizes="180x180"]')).toHaveCount(1);
  const touch = await request.get("/apple-touch-icon.png");
  const png = Buffer.from(await touch.body());
  // A PNG's IHDR holds width and height as big-endian 32-bit numbers at bytes 16 and 20.
  expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([180, 180]);
  for (const [url, type] of [["/favicon.ico", /image\/(x-icon|vnd\.microsoft\.icon)/], ["/icon.svg", /image\/svg\+xml/], ["/icon.png", /image\/png/], ["/apple-touch-icon.png", /image\/png/]] as const) {
    const res = await request.get(url);
    expect(res.status(), url).toBe(200);
    expect(res.headers()["content-type"], url).toMatch(type);
  }
  expect(failed).toEqual([]);
});
