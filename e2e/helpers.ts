import { expect, type APIRequestContext, type Page } from "@playwright/test";
import { E2E_ADMIN_PASSWORD, E2E_ADMIN_TOKEN } from "./constants";
import { makeE2ERepo } from "./global-setup";

export const authHeaders = { authorization: `Bearer ${E2E_ADMIN_TOKEN}` };

export async function signIn(page: Page, callbackPath = "/") {
  await page.goto(callbackPath);
  await expect(page).toHaveURL(/\/signin/);
  await page.getByLabel("Password").fill(E2E_ADMIN_PASSWORD);
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toBeVisible();
}

/** A project on a repository of its own (a repository belongs to one project), created by the owner. */
export async function createProject(request: APIRequestContext, name = "e2e project") {
  const response = await request.post("/api/projects", {
    headers: authHeaders,
    data: { name, repository: { type: "local", path: makeE2ERepo() } },
  });
  expect(response.status()).toBe(201);
  return (await response.json()).project as { id: string };
}
