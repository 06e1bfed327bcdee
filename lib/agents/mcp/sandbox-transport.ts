import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Sandbox, StdioProcess } from "@/lib/sandbox/types";

/*
 * The MCP stdio transport (newline-delimited JSON-RPC, the SDK's own ReadBuffer and serializeMessage) over a process
 * a remote sandbox runs (Sandbox.stdioProcess, E2B): the SDK's StdioClientTransport spawns a local child, which a
 * remote sandbox's process is not.
 */

/** The most of a server's stderr kept, to say why it ended. */
const STDERR_KEPT = 2_000;

export class SandboxStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly buffer = new ReadBuffer();
  private process: StdioProcess | null = null;
  private closed = false;
  private stderr = "";

  constructor(
    private readonly sandbox: Sandbox & Required<Pick<Sandbox, "stdioProcess">>,
    private readonly line: { command: string; args: string[]; cwd?: string; env?: Record<string, string>; timeoutMs: number },
  ) {}

  async start(): Promise<void> {
    if (this.process || this.closed) throw new Error("SandboxStdioTransport already started.");
    this.process = await this.sandbox.stdioProcess(this.line.command, this.line.args, {
      cwd: this.line.cwd,
      env: this.line.env,
      timeoutMs: this.line.timeoutMs,
      onStdout: (data) => {
        this.buffer.append(Buffer.from(data, "utf8"));
        this.drain();
      },
      onStderr: (data) => {
        this.stderr = (this.stderr + data).slice(-STDERR_KEPT);
      },
      onExit: ({ exitCode, error }) => {
        if (this.closed) return;
        const why = error ?? (exitCode === null ? "it was stopped" : `exit code ${exitCode}`);
        this.onerror?.(new Error(`The MCP server's process ended (${why})${this.stderr ? `: ${this.stderr.trim().slice(-500)}` : ""}`));
        void this.close();
      },
    });
    // Ended before the start was answered.
    if (this.closed) await this.process.kill();
  }

  private drain() {
    for (;;) {
      try {
        const message = this.buffer.readMessage();
        if (message === null) return;
        this.onmessage?.(message);
      } catch (error) {
        this.onerror?.(error as Error);
      }
    }
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.process || this.closed) throw new Error("Not connected");
    await this.process.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const process = this.process;
    this.process = null;
    this.buffer.clear();
    await process?.kill().catch(() => null);
    this.onclose?.();
  }
}
