import * as vscode from "vscode";
import type { RunTreeModel, TreeNode } from "../core/run-tree";

/** Maps the plain tree model (src/core/run-tree.ts) onto VS Code's TreeView. */
export class RunTreeProvider implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly off: () => void;

  constructor(private readonly model: RunTreeModel) {
    this.off = model.onDidChange(() => this.emitter.fire(undefined));
  }

  getChildren(element?: TreeNode): TreeNode[] {
    return this.model.children(element);
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    if (node.kind === "message") {
      const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.None);
      item.iconPath = new vscode.ThemeIcon(node.id === "error" ? "warning" : "info");
      return item;
    }
    if (node.kind === "project") {
      const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.Expanded);
      item.id = node.id;
      item.description = node.description;
      item.iconPath = new vscode.ThemeIcon("repo");
      item.contextValue = "project";
      return item;
    }
    const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.iconPath = new vscode.ThemeIcon(node.icon);
    item.contextValue = node.contextValue;
    item.command = { command: "gatehouse.openRun", title: "Open Run", arguments: [node] };
    return item;
  }

  dispose() {
    this.off();
    this.emitter.dispose();
  }
}
