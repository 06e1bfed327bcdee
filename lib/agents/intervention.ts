import type { ModelMessage } from "ai";
import { section } from "@/lib/ai/prompt-sections";
import { redact } from "@/lib/redact";
import type { Todo } from "./tools";

/*
 * Graduated intervention (seed 004): an implementer in trouble — looping on the same call, stopping with todos open,
 * running out of turns — is not stopped at the first sign. Level 1 is a nudge, level 2 a firm reminder with the todo
 * list, level 3 stops the session and asks a person (the workflow's gate about a stopped implementer). The levels only
 * go up within a session (a person's retry starts a new one); each is kept in the state and recorded by the workflow
 * as IMPLEMENTER_NUDGED.
 */

export type InterventionReason = "loop" | "no_progress" | "iteration_limit";
export type InterventionLevel = 1 | 2 | 3;
export type Intervention = { level: InterventionLevel; reason: InterventionReason; detail: string; iteration: number };

/** The same call with the same arguments this many times without progress in between is a loop. */
export const LOOP_REPEATS = 3;
/** This many turns in a row with neither tool use nor progress are a stop with todos open. */
export const MAX_IDLE_TURNS = 3;

type Intervened = {
  interventions?: Intervention[];
  todos: Todo[];
  iteration: number;
  maxIterations: number;
  messages: ModelMessage[];
  repeats: Record<string, number>;
  idleTurns: number;
};

export function interventionLevel(state: Pick<Intervened, "interventions">): number {
  return state.interventions?.at(-1)?.level ?? 0;
}

/** The next level for this trouble (level 3: stop and ask). */
export function nextIntervention(state: Pick<Intervened, "interventions" | "iteration">, reason: InterventionReason, detail: string): Intervention {
  return { level: Math.min(3, interventionLevel(state) + 1) as InterventionLevel, reason, detail: redact(detail), iteration: state.iteration };
}

export function todoList(todos: Todo[]): string {
  return todos.map((t) => `- ${t.id} "${t.title}": ${t.status.replace("_", " ")}`).join("\n");
}

/** What the model is told at level 1 (a nudge) and level 2 (a firm reminder, with the todo list). */
export function interventionMessage(intervention: Intervention, todos: Todo[]): string {
  if (intervention.level === 1) {
    return `Gatehouse — a nudge: ${intervention.detail} Step back and try a different approach: work on your first open todo, and mark each todo done with update_todo when it is finished.`;
  }
  return [
    `Gatehouse — a firm reminder, the last one: ${intervention.detail} If the session goes on like this it stops here, and a person decides how the run continues.`,
    section("todo-list", todoList(todos)),
    "Work on the first todo that is not done, now, with the tools; call update_todo with \"done\" when it is finished. When every todo is done, reply with a short summary and no tool call.",
  ].join("\n\n");
}

/** Level 1 or 2: recorded, said to the model, and the loop and idle counters start again. */
export function applyIntervention<S extends Intervened>(state: S, intervention: Intervention): S {
  return {
    ...state,
    interventions: [...(state.interventions ?? []), intervention],
    messages: [...state.messages, { role: "user", content: interventionMessage(intervention, state.todos) }],
    repeats: {},
    idleTurns: 0,
  };
}

/** Level 3: recorded; the session stops (the caller fails it with `stopMessage`). */
export function recordStop<S extends Intervened>(state: S, intervention: Intervention): S {
  return { ...state, interventions: [...(state.interventions ?? []), intervention] };
}

/** A stop's message says what came before it. */
export function stopMessage(state: Pick<Intervened, "interventions">, message: string): string {
  const levels = (state.interventions ?? []).map((i) => i.level);
  if (levels.includes(1) && levels.includes(2)) return `${message.replace(/\.$/, "")}, after a nudge and a firm reminder.`;
  return message;
}

/**
 * Turns running out: a nudge once a fifth of them are left, a firm reminder once a tenth are (each only after the level
 * below it); at the limit itself the session stops (implementerTurn).
 */
export function iterationTrouble(state: Pick<Intervened, "interventions" | "iteration" | "maxIterations">): string | null {
  const remaining = state.maxIterations - state.iteration;
  if (remaining <= 0) return null;
  const target = remaining <= Math.ceil(state.maxIterations / 10) ? 2 : remaining <= Math.ceil(state.maxIterations / 5) ? 1 : 0;
  if (interventionLevel(state) >= target) return null;
  return `You have used ${state.iteration} of your ${state.maxIterations} turns; ${remaining} ${remaining === 1 ? "is" : "are"} left. Finish the open todos with the turns you have.`;
}
