/*
 * A stand-in for the `vscode` module, enough to run the extension's host code (src/host/extension.ts: activate, its
 * commands, tree, status bar and run panel) in vitest. The person is scripted: `script.inputs` answers input boxes
 * (through their validateInput, as VS Code does), `script.picks` chooses from quick picks. What the extension shows is
 * recorded. Not a test of VS Code itself: that is extensions/vscode/scripts/code-server-check.sh.
 */

type Disposable = { dispose(): void };
const disposable = (): Disposable => ({ dispose() {} });

export const recorded = {
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  info: [] as string[],
  errors: [] as string[],
  invalid: [] as string[],
  panels: [] as string[],
  quickPickTitles: [] as string[],
  statusItems: [] as Array<{ id: string; text?: string; tooltip?: string; command?: string; visible: boolean }>,
};

export const script = {
  inputs: [] as Array<string | undefined>,
  /** Each pick gets the items and returns the chosen one. */
  picks: [] as Array<(items: Array<Record<string, unknown>>) => unknown>,
};

class EventEmitter<T> {
  private listeners: Array<(value: T) => void> = [];
  event = (listener: (value: T) => void): Disposable => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  fire(value: T) {
    for (const l of this.listeners) l(value);
  }
  dispose() {
    this.listeners = [];
  }
}

const uri = (value: string) => ({ toString: () => value, fsPath: value, path: value });

export const vscode = {
  EventEmitter,
  TreeItem: class {
    constructor(
      public label: string,
      public collapsibleState: number,
    ) {}
  },
  TreeItemCollapsibleState: { None: 0, Collapsed: 1, Expanded: 2 },
  ThemeIcon: class {
    constructor(public id: string) {}
  },
  StatusBarAlignment: { Left: 1, Right: 2 },
  ViewColumn: { Active: -1 },
  ColorThemeKind: { Light: 1, Dark: 2, HighContrast: 3 },
  Uri: { parse: uri, file: uri, joinPath: (base: { path: string }, ...parts: string[]) => uri([base.path, ...parts].join("/")), from: ({ path }: { path: string }) => uri(path) },
  commands: {
    registerCommand(id: string, fn: (...args: unknown[]) => unknown) {
      recorded.commands.set(id, fn);
      return disposable();
    },
    executeCommand: async (id: string, ...args: unknown[]) => recorded.commands.get(id)?.(...args),
  },
  window: {
    activeColorTheme: { kind: 1 },
    createTreeView: () => disposable(),
    createStatusBarItem(id: string) {
      const item = { id, visible: false, name: "", text: undefined, tooltip: undefined, command: undefined, show: () => void (item.visible = true), hide: () => void (item.visible = false), dispose() {} };
      recorded.statusItems.push(item);
      return item;
    },
    showInformationMessage: async (message: string) => void recorded.info.push(message),
    showErrorMessage: async (message: string) => void recorded.errors.push(message),
    async showInputBox(options?: { validateInput?: (value: string) => string | null | undefined }) {
      const value = script.inputs.shift();
      if (value === undefined) return undefined;
      const problem = options?.validateInput?.(value);
      if (problem) {
        recorded.invalid.push(problem);
        return undefined;
      }
      return value;
    },
    async showQuickPick(items: unknown, options?: { title?: string }) {
      recorded.quickPickTitles.push(options?.title ?? "");
      const pick = script.picks.shift();
      return pick ? pick((await items) as Array<Record<string, unknown>>) : undefined;
    },
    createWebviewPanel(_type: string, title: string) {
      recorded.panels.push(title);
      return {
        webview: { html: "", cspSource: "vscode-resource:", asWebviewUri: (u: unknown) => u, onDidReceiveMessage: () => disposable(), postMessage: async () => true },
        reveal() {},
        onDidDispose: () => disposable(),
      };
    },
  },
  workspace: {
    config: { serverUrl: "", refreshSeconds: 3600 } as Record<string, unknown>,
    getConfiguration() {
      return { get: <T>(key: string, fallback: T): T => (vscode.workspace.config[key] as T) ?? fallback };
    },
    onDidChangeConfiguration: () => disposable(),
    registerTextDocumentContentProvider: () => disposable(),
  },
};

/** An ExtensionContext holding `token` in its SecretStorage. */
export function fakeContext(token: string) {
  const secrets = new Map([["gatehouse.token", token]]);
  return {
    subscriptions: [] as Disposable[],
    extensionUri: uri("/ext"),
    secrets: {
      get: async (key: string) => secrets.get(key),
      store: async (key: string, value: string) => void secrets.set(key, value),
      delete: async (key: string) => void secrets.delete(key),
      onDidChange: () => disposable(),
    },
  };
}
