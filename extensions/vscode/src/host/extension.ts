import * as vscode from "vscode";
import { fileAnswer } from "../../../../cli/commands/decide";
import { GatehouseApi, errorMessage, type Answer, type Run } from "../core/api";
import { RunTreeModel, needsYou, type ProjectNode, type RunNode } from "../core/run-tree";
import { checkApproaches, checkRequest, projectItems, startRuns, waitingStatus } from "../core/start-run";
import { DIFF_SCHEME, DiffDocuments } from "./diff-view";
import { RunPanel } from "./run-panel";
import { RunTreeProvider } from "./tree-provider";

const TOKEN_KEY = "gatehouse.token";

/** The run a command acts on: the tree node it was invoked on, or one picked from the runs (those waiting first). */
async function pickRun({ model, node, filter, title }: { model: RunTreeModel; node?: { id?: string }; filter?: (run: Run) => boolean; title: string }): Promise<Run | undefined> {
  if (node?.id) return model.run(node.id) ?? ({ id: node.id } as Run);
  const runs = model.waiting().filter(filter ?? (() => true));
  if (runs.length === 0) {
    void vscode.window.showInformationMessage("Gatehouse: no run waits for that decision. Refresh the tree if you expected one.");
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    runs.map((run) => ({ label: run.title, description: run.id, detail: needsYou(run) ?? run.status, run })),
    { title },
  );
  return picked?.run;
}

export async function activate(context: vscode.ExtensionContext) {
  let token = (await context.secrets.get(TOKEN_KEY)) ?? "";
  const serverUrl = () => vscode.workspace.getConfiguration("gatehouse").get<string>("serverUrl", "http://127.0.0.1:3000").trim();
  const api = () => (serverUrl() && token ? new GatehouseApi({ url: serverUrl(), token }) : null);
  const need = () => {
    const client = api();
    if (!client) throw new Error("Not connected: set gatehouse.serverUrl and run “Gatehouse: Set API Token”.");
    return client;
  };

  const model = new RunTreeModel({
    api,
    onNeedsYou: ({ run, reason }) => {
      void vscode.window.showInformationMessage(`Gatehouse: “${run.title}”: ${reason}.`, "Open").then((choice) => {
        if (choice === "Open") RunPanel.show({ context, api, runId: run.id });
      });
    },
  });
  model.onDidChange(() => RunPanel.changed());
  const provider = new RunTreeProvider(model);
  const diffs = new DiffDocuments();

  /** Run a command body; a failure is shown as the server's message, never thrown at VS Code. */
  const command = (id: string, body: (...args: never[]) => Promise<unknown>) =>
    vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        await (body as (...a: unknown[]) => Promise<unknown>)(...args);
      } catch (error) {
        void vscode.window.showErrorMessage(`Gatehouse: ${errorMessage(error)}`);
      }
    });

  /** New run / explore approaches: the project (the tree node's, or picked), the request, and how many approaches. */
  const startFrom = async (node: ProjectNode | undefined, explore: boolean) => {
    const client = need();
    let projectId = node?.kind === "project" ? node.id : undefined;
    if (!projectId) {
      const picked = await vscode.window.showQuickPick(projectItems(await client.projects()), { title: explore ? "Explore approaches in which project?" : "New run in which project?" });
      if (!picked) return;
      projectId = picked.project.id;
    }
    const request = await vscode.window.showInputBox({
      title: explore ? "Explore approaches: the request" : "New run: the request",
      prompt: "What should the run do? (the planner reads it as written)",
      ignoreFocusOut: true,
      validateInput: checkRequest,
    });
    if (!request) return;
    let approaches: number | undefined;
    if (explore) {
      const count = await vscode.window.showInputBox({ title: "How many approaches?", value: "3", prompt: "2 to 5 runs of the same request, each told which approach it is.", validateInput: checkApproaches });
      if (!count) return;
      approaches = Number(count.trim());
    }
    const { runs, message } = await startRuns({ api: client, projectId, request, approaches });
    await decided(message);
    if (runs.length === 1) RunPanel.show({ context, api, runId: runs[0]!.id });
  };

  // The decisions that wait for you, counted in the status bar (the inbox's open count); a click opens one.
  const status = vscode.window.createStatusBarItem("gatehouse.waiting", vscode.StatusBarAlignment.Left, 50);
  status.name = "Gatehouse: decisions waiting";
  status.command = "gatehouse.openRun";
  const showStatus = async () => {
    const client = api();
    const count = client ? await client.waitingCount().catch(() => null) : null;
    Object.assign(status, waitingStatus(count));
    status.show();
  };
  model.onDidChange(() => void showStatus());

  const decided = async (message: string) => {
    void vscode.window.showInformationMessage(`Gatehouse: ${message}`);
    await model.refresh();
  };

  context.subscriptions.push(
    vscode.window.createTreeView("gatehouse.runs", { treeDataProvider: provider, showCollapseAll: true }),
    provider,
    { dispose: () => model.dispose() },
    vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, diffs),
    status,
    command("gatehouse.refresh", () => model.refresh()),
    command("gatehouse.newRun", (node?: ProjectNode) => startFrom(node, false)),
    command("gatehouse.exploreApproaches", (node?: ProjectNode) => startFrom(node, true)),
    command("gatehouse.setToken", async () => {
      const value = await vscode.window.showInputBox({
        title: "Gatehouse API token",
        prompt: `A token for ${serverUrl()} (create one under Settings → API tokens in the dashboard). It is kept in VS Code's SecretStorage.`,
        password: true,
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() ? null : "Paste the token; it must not be empty."),
      });
      if (!value) return;
      await context.secrets.store(TOKEN_KEY, value.trim());
    }),
    command("gatehouse.clearToken", async () => {
      await context.secrets.delete(TOKEN_KEY);
    }),
    context.secrets.onDidChange(async (e) => {
      if (e.key !== TOKEN_KEY) return;
      token = (await context.secrets.get(TOKEN_KEY)) ?? "";
      await model.refresh();
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("gatehouse.serverUrl")) void model.refresh();
    }),
    command("gatehouse.openRun", async (node?: RunNode) => {
      const run = node?.id ? { id: node.id } : await pickRun({ model, title: "Open a Gatehouse run" });
      if (run) RunPanel.show({ context, api, runId: run.id });
    }),
    command("gatehouse.showPlan", async (node?: RunNode) => {
      if (node?.id) RunPanel.show({ context, api, runId: node.id, section: "plan" });
    }),
    command("gatehouse.showReport", async (node?: RunNode) => {
      if (node?.id) RunPanel.show({ context, api, runId: node.id, section: "report" });
    }),
    command("gatehouse.showDiff", async (node?: RunNode) => {
      if (node?.id) await diffs.open({ api: need(), runId: node.id });
    }),
    command("gatehouse.approve", async (node?: RunNode) => {
      const run = await pickRun({ model, node, filter: (r) => r.status === "awaiting_approval", title: "Approve which run?" });
      if (!run) return;
      const { gate } = await need().approve({ id: run.id });
      await decided(`approved the ${gate.kind} gate #${gate.gateNumber} of ${run.id}; the run goes on.`);
    }),
    command("gatehouse.reject", async (node?: RunNode) => {
      const run = await pickRun({ model, node, filter: (r) => r.status === "awaiting_approval", title: "Reject which run's plan?" });
      if (!run) return;
      const feedback = await vscode.window.showInputBox({
        title: `Reject the plan of ${run.id}`,
        prompt: "What should the planner change?",
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() ? null : "Say what the planner should change; the feedback must not be empty."),
      });
      if (!feedback) return;
      await need().reject({ id: run.id, feedback });
      await decided(`rejected the plan of ${run.id}; the planner plans again with your feedback.`);
    }),
    command("gatehouse.fix", async (node?: RunNode) => {
      const run = await pickRun({ model, node, filter: (r) => r.status === "awaiting_fix_decision" || r.pendingGate?.kind === "fix", title: "Decide on which failed validation?" });
      if (!run) return;
      const choice = await vscode.window.showQuickPick(
        [
          { label: "retry", detail: "Implementation tries again with the validator's findings." },
          { label: "accept", detail: "Deliver the work as it is, marked as accepted despite failed validation." },
          { label: "cancel", detail: "Cancel the run." },
        ],
        { title: `Fix decision for ${run.id}` },
      );
      if (!choice) return;
      await need().fix({ id: run.id, decision: choice.label as "retry" | "accept" | "cancel" });
      await decided(`decided ${choice.label} on ${run.id}.`);
    }),
    command("gatehouse.answer", async (node?: RunNode) => {
      const run = await pickRun({ model, node, filter: (r) => r.status === "awaiting_clarification", title: "Answer which run's question?" });
      if (!run) return;
      const detail = await need().run({ id: run.id });
      const question = detail.clarifications.find((c) => c.status === "pending");
      if (!question) throw new Error(`${run.id} has no open question (it is ${detail.run.status}).`);
      const title = `${question.stage} asks: ${question.question}`;
      let response: Answer | undefined;
      const options = question.options ?? [];
      if (question.responseType === "single_choice") {
        response = (await vscode.window.showQuickPick(options, { title, placeHolder: question.context ?? "Choose one" })) ?? undefined;
      } else if (question.responseType === "multiple_choice") {
        const picked = await vscode.window.showQuickPick(options, { title, canPickMany: true, placeHolder: question.context ?? "Choose any" });
        response = picked && picked.length > 0 ? picked : undefined;
      } else if (question.responseType === "file") {
        const [file] = (await vscode.window.showOpenDialog({ title, canSelectMany: false, openLabel: "Upload" })) ?? [];
        response = file ? fileAnswer(file.fsPath) : undefined;
      } else {
        response = await vscode.window.showInputBox({
          title,
          prompt: question.context ?? undefined,
          ignoreFocusOut: true,
          validateInput: (v) => (v.trim() ? null : "The answer must not be empty."),
        });
      }
      if (response === undefined) return;
      await need().answer({ clarificationId: question.id, response });
      await decided(`answered the question of ${run.id}; the run goes on.`);
    }),
  );

  // The API has no stream of new runs: the list is re-read on a timer, each unfinished run is followed over SSE.
  const seconds = Math.max(5, vscode.workspace.getConfiguration("gatehouse").get<number>("refreshSeconds", 30));
  const timer = setInterval(() => void model.refresh(), seconds * 1000);
  context.subscriptions.push({ dispose: () => clearInterval(timer) });
  await model.refresh();
  await showStatus();
  // Runs that already waited before VS Code started are not announced one by one; one summary says how many.
  const waiting = model.waiting();
  if (waiting.length > 0) {
    const what = waiting.length === 1 ? `“${waiting[0]!.title}”: ${needsYou(waiting[0]!)}` : `${waiting.length} runs wait for you`;
    void vscode.window.showInformationMessage(`Gatehouse: ${what}.`, "Open").then(async (choice) => {
      if (choice === "Open") await vscode.commands.executeCommand("gatehouse.openRun", waiting.length === 1 ? { id: waiting[0]!.id } : undefined);
    });
  }
}

export function deactivate() {}
