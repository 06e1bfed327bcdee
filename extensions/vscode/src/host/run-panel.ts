import * as vscode from "vscode";
import { bridgeFetch } from "../core/bridge";
import type { GatehouseApi } from "../core/api";

/**
 * The HITL panel and artifact viewer of one run: a webview that renders the dashboard's own components (decision cards,
 * typed question forms, the plan with its Mermaid diagram, the validation report) from dist/webview.js. Its API calls go
 * through the extension host (src/core/bridge.ts).
 */
export class RunPanel {
  private static panels = new Map<string, RunPanel>();

  static show({ context, api, runId, section }: { context: vscode.ExtensionContext; api: () => GatehouseApi | null; runId: string; section?: "decide" | "plan" | "report" }) {
    const existing = RunPanel.panels.get(runId);
    if (existing) {
      existing.panel.reveal();
      if (section) void existing.panel.webview.postMessage({ type: "section", section });
      return existing;
    }
    const panel = vscode.window.createWebviewPanel("gatehouse.run", `Run ${runId}`, vscode.ViewColumn.Active, {
      enableScripts: true,
      retainContextWhenHidden: true,
      localResourceRoots: [vscode.Uri.joinPath(context.extensionUri, "dist")],
    });
    const created = new RunPanel(context, panel, api, runId, section ?? "decide");
    RunPanel.panels.set(runId, created);
    return created;
  }

  /** Tell the open panels that runs changed (the tree saw events on their streams): each re-reads its run. */
  static changed() {
    for (const open of RunPanel.panels.values()) void open.panel.webview.postMessage({ type: "refresh" });
  }

  private constructor(
    context: vscode.ExtensionContext,
    readonly panel: vscode.WebviewPanel,
    api: () => GatehouseApi | null,
    runId: string,
    section: string,
  ) {
    const webview = panel.webview;
    const asset = (name: string) => webview.asWebviewUri(vscode.Uri.joinPath(context.extensionUri, "dist", name));
    const nonce = Array.from({ length: 32 }, () => Math.floor(Math.random() * 36).toString(36)).join("");
    const dark = vscode.window.activeColorTheme.kind === vscode.ColorThemeKind.Dark || vscode.window.activeColorTheme.kind === vscode.ColorThemeKind.HighContrast;
    webview.html = `<!doctype html>
<html lang="en" class="${dark ? "dark" : ""}">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src ${webview.cspSource} data:; style-src ${webview.cspSource} 'unsafe-inline'; font-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${asset("theme.css")}">
<link rel="stylesheet" href="${asset("webview.css")}">
</head>
<body class="bg-background text-foreground">
<div id="root" data-run-id="${runId.replace(/[^\w-]/g, "")}" data-section="${section}"></div>
<script nonce="${nonce}" src="${asset("webview.js")}"></script>
</body>
</html>`;
    webview.onDidReceiveMessage(async (message: { type?: string; runId?: string }) => {
      if (message?.type === "fetch") {
        const client = api();
        if (!client) {
          const body = JSON.stringify({ error: { code: "unauthorized", message: "Not connected: set gatehouse.serverUrl and run “Gatehouse: Set API Token”." } });
          void webview.postMessage({ type: "fetch-result", id: (message as { id?: number }).id ?? -1, status: 401, body, contentType: "application/json" });
          return;
        }
        void webview.postMessage(await bridgeFetch({ api: client, message }));
      } else if (message?.type === "open-diff") {
        void vscode.commands.executeCommand("gatehouse.showDiff", { kind: "run", id: runId });
      } else if (message?.type === "decided") {
        void vscode.commands.executeCommand("gatehouse.refresh");
      }
    });
    panel.onDidDispose(() => RunPanel.panels.delete(runId));
  }
}
