import http from "node:http";
import type { AddressInfo } from "node:net";
import { getEnv } from "@/lib/env";
import { startWorkflowHarness } from "../workflow/harness";
import { findApiRoutes, importApiRoutes, serveApiRoutes } from "./routes";

/**
 * The real server, as far as an API client can tell: the app's own route handlers behind a node:http server, and the
 * real workflow on the embedded executor with the demo model. The CLI reaches it only over HTTP.
 */
export async function startApiServer() {
  const harness = await startWorkflowHarness();
  const routes = findApiRoutes();
  await importApiRoutes(routes);
  const server = http.createServer(serveApiRoutes(routes));
  let connections = 0;
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    user: harness.user,
    dataDir: getEnv().dataDir,
    /** TCP connections the server has accepted so far. */
    connections: () => connections,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await harness.close();
    },
  };
}
