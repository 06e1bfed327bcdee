import { expect, test } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

test("the built app starts and the runs page renders in Chromium after signing in", async ({ page, request }) => {
  const health = await request.get("/api/health");
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
  await page.screenshot({ path: "e2e/.artifacts/screenshots/runs-list.png", fullPage: true });
});

test("an unauthenticated API call gets a typed 401", async ({ request }) => {
  const response = await request.get("/api/runs");
  expect(response.status()).toBe(401);
  expect(await response.json()).toMatchObject({ error: { code: "unauthorized:auth" } });
});
