import type { EventEmitter } from "node:events";

/**
 * Graceful shutdown for `npm start` (which sets NEXT_MANUAL_SIG_HANDLE so that this handler, not Next's, owns SIGTERM
 * and SIGINT): the embedded executor stops taking work, lets in-flight steps finish (up to its stop timeout) and hands
 * back the rest — their leases lapse within GATEHOUSE's lease time and another process resumes them — then the
 * database closes and the process exits 0. A second signal while stopping exits at once (1).
 */
export function installGracefulShutdown({
  stop,
  say = (line: string) => console.log(line),
  exit = (code: number) => process.exit(code),
  target = process,
  signals = ["SIGTERM", "SIGINT"],
}: {
  stop: () => Promise<void>;
  say?: (line: string) => void;
  exit?: (code: number) => void;
  target?: Pick<EventEmitter, "on">;
  signals?: string[];
}): void {
  let stopping = false;
  for (const signal of signals) {
    target.on(signal, () => {
      if (stopping) {
        say(`[gatehouse] ${signal} again: exiting now`);
        exit(1);
        return;
      }
      stopping = true;
      say(`[gatehouse] ${signal}: stopping (in-flight steps finish or are handed back to another process)…`);
      stop().then(
        () => {
          say("[gatehouse] stopped");
          exit(0);
        },
        (error: unknown) => {
          say(`[gatehouse] stopping failed: ${error instanceof Error ? error.message : String(error)}`);
          exit(1);
        },
      );
    });
  }
}
