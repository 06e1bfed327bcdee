import { checkRouting, defaultRouting } from "@/lib/ai";

/** Model routing for new runs: defaults from the configured providers; a provider without its key is refused. */
export type StageRouting = { planner: string; implementer: string; validator: string };

export function routingForNewRun(): StageRouting {
  return defaultRouting();
}

/**
 * A new run's routing with the unusable project defaults replaced: a stage whose model came from a default (the
 * project's config or the repository's .autonomous/config.json) and whose provider has no key falls back to the default
 * routing's model, with a note for the run; a stage the run's own config names stays a problem (a 400).
 */
export function routingWithFallbacks({
  routing,
  explicit,
  fallback,
}: {
  routing: StageRouting;
  explicit: Partial<Record<keyof StageRouting, unknown>>;
  fallback: StageRouting;
}): { routing: StageRouting; notes: string[]; problems: string[] } {
  const out = { ...routing };
  const notes: string[] = [];
  const problems: string[] = [];
  for (const problem of checkRouting(routing)) {
    if (explicit[problem.role] !== undefined) {
      problems.push(problem.message);
      continue;
    }
    out[problem.role] = fallback[problem.role];
    notes.push(`The project's default ${problem.message} The ${problem.role} uses ${fallback[problem.role]} instead.`);
  }
  return { routing: out, notes, problems };
}
