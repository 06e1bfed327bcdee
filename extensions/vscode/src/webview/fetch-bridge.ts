/*
 * fetch() inside the webview: the dashboard components call fetch("/api/…") as in the browser; here each call is posted
 * to the extension host (src/core/bridge.ts), which sends it with the token and posts the response back.
 */

type HostMessage = { type: "fetch-result"; id: number; status: number; body: string; contentType: string } | { type: "refresh" } | { type: "section"; section: string };
export type VsCodeApi = { postMessage(message: unknown): void };

export function installFetchBridge({ vscode, onMessage }: { vscode: VsCodeApi; onMessage: (message: HostMessage) => void }) {
  let next = 1;
  const pending = new Map<number, (response: Response) => void>();
  window.addEventListener("message", (event: MessageEvent<HostMessage>) => {
    const message = event.data;
    if (message?.type === "fetch-result") {
      const resolve = pending.get(message.id);
      pending.delete(message.id);
      resolve?.(new Response(message.status === 204 ? null : message.body, { status: message.status, headers: { "content-type": message.contentType } }));
    } else if (message) onMessage(message);
  });
  window.fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.pathname + input.search : input.url;
    const id = next++;
    const body = typeof init?.body === "string" ? init.body : undefined;
    vscode.postMessage({ type: "fetch", id, url, method: (init?.method ?? "GET").toUpperCase(), ...(body === undefined ? {} : { body }) });
    return new Promise<Response>((resolve) => pending.set(id, resolve));
  };
}
