import { checkRouting, defaultRouting } from "@/lib/ai";

/** Model routing for new runs: defaults from the configured providers; a provider without its key is refused. */
export type StageRouting = { planner: string; implementer: string; validator: string };

export function routingForNewRun(): StageRouting {
  return defaultRouting();
}

export function routingProblems(routing: StageRouting): string[] {
  return checkRouting(routing).map((p) => p.message);
}
