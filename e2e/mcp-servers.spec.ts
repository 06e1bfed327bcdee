import { expect, test } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

test("MCP servers: an owner adds a stdio and a remote server (its header value masked, never sent back), sets the policy of a server's tools, removes a server", async ({ page, request }) => {
  const secret = "Bearer e2e-mcp-header-5a7c1f";
  const project = await createProject(request, "mcp project");
  // Every answer the browser gets from the project's API, to check the header value never comes back.
  const answers: string[] = [];
  page.on("response", async (response) => {
    if (response.url().includes(`/api/projects`)) answers.push(await response.text().catch(() => ""));
  });
  await signIn(page, "/projects");
  const card = page.getByTestId("project-card").filter({ hasText: "mcp project" });
  await card.getByText("MCP servers", { exact: true }).click();
  const section = card.getByTestId("project-mcp-servers");
  await expect(section.getByText("No MCP servers yet.")).toBeVisible();

  // A stdio server: command, arguments, environment.
  const add = section.getByTestId("mcp-add");
  await add.getByLabel("Name (letters, digits, _ or -)").fill("notes");
  await add.getByLabel("Command").fill("node");
  await add.getByLabel("Arguments (one a line)").fill("tools/notes-server.mjs\n--verbose");
  await add.getByLabel(/^Environment/).fill("NOTES_DIR=docs");
  await add.getByRole("button", { name: "Save server" }).click();
  const notes = section.getByTestId("mcp-server").filter({ hasText: "notes" });
  await expect(notes).toContainText("node tools/notes-server.mjs --verbose");
  await expect(notes).toContainText("env: NOTES_DIR=docs");
  await expect(notes.getByText("stdio", { exact: true })).toBeVisible();

  // A bad entry says what to fix.
  await add.getByLabel("Name (letters, digits, _ or -)").fill("bad");
  await add.getByText("Remote (URL)").click();
  await add.getByLabel("URL (a public address)").fill("ftp://example.com/mcp");
  await add.getByRole("button", { name: "Save server" }).click();
  await expect(add.getByRole("alert")).toContainText("server.url");

  // A remote server with a secret header, typed into a password field.
  await add.getByLabel("Name (letters, digits, _ or -)").fill("search");
  await add.getByLabel("URL (a public address)").fill("https://mcp.example.com/mcp");
  await add.getByRole("button", { name: "Add a header" }).click();
  await add.getByLabel("Header 1 name").fill("Authorization");
  await expect(add.getByLabel("Header 1 value")).toHaveAttribute("type", "password");
  await add.getByLabel("Header 1 value").fill(secret);
  await add.getByRole("button", { name: "Save server" }).click();
  const search = section.getByTestId("mcp-server").filter({ hasText: "search" });
  await expect(search).toContainText("https://mcp.example.com/mcp");
  await expect(search.getByTestId("mcp-headers")).toHaveText("headers: Authorization: ••••••••");
  await expect(add.getByLabel("Name (letters, digits, _ or -)")).toHaveValue("");

  // The policy of the search server's tools: every call needs a person's approval.
  await search.getByTestId("mcp-policy-search").selectOption("ask");
  await expect
    .poll(async () => {
      const projects = (await (await request.get("/api/projects", { headers: authHeaders })).json()) as { projects: Array<{ id: string; defaultConfig: { policy?: { mcp?: unknown } } }> };
      return projects.projects.find((p) => p.id === project.id)?.defaultConfig.policy?.mcp;
    })
    .toEqual({ "search.*": "ask" });
  await page.screenshot({ path: `${SHOTS}/mcp-servers.png`, fullPage: true });

  // After a reload, from the server: both servers, the header still masked, the policy kept.
  await page.reload();
  await card.getByText("MCP servers", { exact: true }).click();
  await expect(section.getByTestId("mcp-server")).toHaveCount(2);
  await expect(search.getByTestId("mcp-policy-search")).toHaveValue("ask");
  await expect(search.getByTestId("mcp-headers")).toHaveText("headers: Authorization: ••••••••");

  await notes.getByRole("button", { name: "Remove" }).click();
  await expect(section.getByTestId("mcp-server")).toHaveCount(1);
  await expect(section.getByTestId("mcp-server")).toContainText("search");

  expect(answers.length).toBeGreaterThan(0);
  expect(answers.join("\n")).not.toContain("e2e-mcp-header-5a7c1f");
  expect(await page.content()).not.toContain("e2e-mcp-header-5a7c1f");
});
