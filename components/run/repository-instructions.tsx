import type { RunDetail } from "@/components/runs/api";

/** The repository's instruction files (AGENTS.md …) the run's prompts quoted: which, how big, which version, cut or not. */
export function RepositoryInstructions({ files }: { files: NonNullable<RunDetail["instructions"]> }) {
  if (files.length === 0) return null;
  return (
    <section className="mt-4 space-y-1" data-testid="run-instructions">
      <h3 className="text-sm font-medium">Repository instructions read</h3>
      <p className="text-muted-foreground text-xs">Quoted to the agents as repository content; they never change the policy, the sandbox or the network.</p>
      <ul className="space-y-0.5 text-sm">
        {files.map((f) => (
          <li key={`${f.path}-${f.sha}`} data-testid="run-instruction-file" className="flex flex-wrap gap-x-2">
            <code>{f.path}</code>
            <span className="text-muted-foreground text-xs">
              {f.bytes} bytes · sha256 <code title={f.sha}>{f.sha.slice(0, 12)}</code> · {f.stages.join(", ")}
              {f.cut ? " · cut to fit the prompt" : ""}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
