import * as vscode from "vscode";
import { diffDocuments, type DiffFile } from "../core/diff-documents";
import type { GatehouseApi } from "../core/api";

export const DIFF_SCHEME = "gatehouse-diff";

/** Virtual documents of a run's branch diff: gatehouse-diff:/<run>/<before|after>/<path>. */
export class DiffDocuments implements vscode.TextDocumentContentProvider {
  private files = new Map<string, DiffFile[]>();

  provideTextDocumentContent(uri: vscode.Uri): string {
    const [, runId, side, ...rest] = uri.path.split("/");
    const file = this.files.get(runId ?? "")?.find((f) => f.path === rest.join("/"));
    if (!file) return "";
    return side === "before" ? file.before : file.after;
  }

  /** Fetch the run's diff, then open one file in the diff editor (a quick pick when there are several). */
  async open({ api, runId }: { api: GatehouseApi; runId: string }) {
    const diff = await api.diff({ id: runId });
    const files = diffDocuments({ diff: diff.diff });
    if (files.length === 0) {
      void vscode.window.showInformationMessage(`${runId} has no changes on its branch yet (or its project is not a local repository).`);
      return;
    }
    this.files.set(runId, files);
    const chosen =
      files.length === 1
        ? files[0]
        : (
            await vscode.window.showQuickPick(
              files.map((f) => ({ label: f.path, description: f.status, file: f })),
              { title: `Branch diff of ${runId}${diff.truncated ? " (truncated by the server)" : ""}`, placeHolder: "Pick a changed file" },
            )
          )?.file;
    if (!chosen) return;
    const uri = (side: string) => vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${runId}/${side}/${chosen.path}` });
    await vscode.commands.executeCommand("vscode.diff", uri("before"), uri("after"), `${chosen.path} (${diff.base?.slice(0, 7) ?? "base"} ↔ ${diff.head?.slice(0, 7) ?? "branch"})`);
  }
}
