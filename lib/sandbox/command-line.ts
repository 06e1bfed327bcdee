/**
 * Split a command line into program and arguments without a shell. Lines using shell syntax (pipes, &&, redirects,
 * variables) run as `sh -c <line>` inside the sandbox instead.
 */
export function commandArgv(line: string): { command: string; args: string[] } {
  if (/[|&;<>()$`\n]/.test(line)) return { command: "sh", args: ["-c", line] };
  const args: string[] = [];
  let current = "";
  let quote: '"' | "'" | null = null;
  let has = false;
  for (const ch of line.trim()) {
    if (quote) {
      if (ch === quote) quote = null;
      else current += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      has = true;
    } else if (/\s/.test(ch)) {
      if (has || current) args.push(current);
      current = "";
      has = false;
    } else {
      current += ch;
    }
  }
  if (has || current) args.push(current);
  const [command = "true", ...rest] = args;
  return { command, args: rest };
}
