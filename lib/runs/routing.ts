/**
 * Model routing for new runs. The agents layer (lib/ai) owns providers; until it registers its resolver, every stage
 * uses the demo model, which needs no key.
 */
export type StageRouting = { planner: string; implementer: string; validator: string };

type RoutingHooks = { defaultRouting: () => StageRouting; problems: (routing: StageRouting) => string[] };

const hooks: RoutingHooks = {
  defaultRouting: () => ({ planner: "demo:default", implementer: "demo:default", validator: "demo:default" }),
  problems: (routing) =>
    Object.entries(routing)
      .filter(([, id]) => !id.startsWith("demo:"))
      .map(([stage, id]) => `modelRouting.${stage}: provider of "${id}" is not configured.`),
};

export function routingForNewRun(): StageRouting {
  return hooks.defaultRouting();
}

export function routingProblems(routing: StageRouting): string[] {
  return hooks.problems(routing);
}
