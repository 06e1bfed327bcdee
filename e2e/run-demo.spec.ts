import { expect, test } from "@playwright/test";
import { authHeaders, createProject } from "./helpers";

test("a full-auto demo run completes on the built server's embedded executor", async ({ request }) => {
  const project = await createProject(request, "demo run project");
  const created = await request.post("/api/runs", {
    headers: authHeaders,
    data: {
      projectId: project.id,
      request: "Add a greeting\n\n```file:src/greeting.txt\nhello from the e2e run\n```",
      config: { trustMode: { planning: "auto" } },
    },
  });
  expect(created.status()).toBe(201);
  const { run } = await created.json();
  await expect
    .poll(async () => (await (await request.get(`/api/runs/${run.id}`, { headers: authHeaders })).json()).run.status, {
      timeout: 60_000,
    })
    .toBe("completed");
  const diff = await (await request.get(`/api/runs/${run.id}/diff`, { headers: authHeaders })).json();
  expect(diff.diff).toContain("+hello from the e2e run");
  const health = await (await request.get("/api/health", { headers: authHeaders })).json();
  expect(health.executor).toMatchObject({ mode: "embedded", running: true });
});
