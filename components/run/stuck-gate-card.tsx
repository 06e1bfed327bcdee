"use client";

import { useState } from "react";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Label } from "@/components/ui/label";
import { Textarea } from "@/components/ui/textarea";
import type { Gate, Run } from "@/components/runs/api";
import { DeadlineCountdown } from "./deadline-countdown";
import { useDecision } from "./use-decision";
import { ErrorNote } from "./error-note";

type Stuck = {
  reason: "loop" | "no_progress" | "iteration_limit" | null;
  message: string;
  todos: Array<{ id: string; title: string; status: string }>;
  interventions: Array<{ level: number; reason: string; detail: string }>;
};

/** What a fix gate about a stopped implementer carries (inngest/run/stuck.ts), or null for a fix gate after validation. */
export function stuckOf(gate: Gate | null): Stuck | null {
  const stuck = (gate?.context as { stuck?: Partial<Stuck> } | null)?.stuck;
  return stuck ? { reason: stuck.reason ?? null, message: stuck.message ?? "", todos: stuck.todos ?? [], interventions: stuck.interventions ?? [] } : null;
}

const WHY = { loop: "it kept repeating the same call", no_progress: "it kept stopping with todos open", iteration_limit: "it used all its turns" } as const;

/**
 * The implementer stopped after a nudge and a firm reminder: retry (a new session, told the note), send the run back to
 * planning (a re-plan through the plan gate), or cancel it. There is no finished work to accept.
 */
export function StuckGateCard({ run, gate }: { run: Run; gate: Gate }) {
  const decision = useDecision(run.id);
  const [notes, setNotes] = useState("");
  const stuck = stuckOf(gate)!;
  const note = notes.trim();
  const decide = (value: "retry" | "replan" | "cancel", success: string) =>
    decision.mutate({ url: `/api/runs/${run.id}/fix-decision`, body: { gateId: gate.id, decision: value, ...(note ? { notes: note } : {}) }, success });
  return (
    <Card className="border-amber-500/50" data-testid="stuck-gate">
      <CardHeader>
        <CardTitle>The implementer stopped — how should it go on?</CardTitle>
        <CardDescription>
          {stuck.reason ? `It stopped because ${WHY[stuck.reason]}` : "It stopped before finishing"}, after a nudge and a firm reminder.
        </CardDescription>
        <DeadlineCountdown deadline={gate.deadline} />
      </CardHeader>
      <CardContent className="space-y-3">
        <p className="text-sm" data-testid="stuck-message">{stuck.message}</p>
        <ul className="space-y-1 text-sm" data-testid="stuck-todos">
          {stuck.todos.map((t) => (
            <li key={t.id}>
              <span className="font-mono">{t.id}</span> {t.title} <span className="text-muted-foreground">({t.status.replace("_", " ")})</span>
            </li>
          ))}
        </ul>
        <div className="grid gap-2">
          <Label htmlFor="stuck-notes">Note for the implementer's next session (optional)</Label>
          <Textarea id="stuck-notes" value={notes} onChange={(e) => setNotes(e.target.value)} rows={2} />
        </div>
        <ErrorNote error={decision.error} />
      </CardContent>
      <CardFooter className="flex flex-wrap gap-2">
        <Button data-testid="stuck-retry" disabled={decision.isPending} onClick={() => decide("retry", "Retrying with your note")}>
          Retry with the note
        </Button>
        <Button variant="outline" data-testid="stuck-replan" disabled={decision.isPending} onClick={() => decide("replan", "Sent back to planning")}>
          Back to planning
        </Button>
        <Button variant="destructive" data-testid="stuck-cancel" disabled={decision.isPending} onClick={() => decide("cancel", "Run cancelled")}>
          Cancel the run
        </Button>
      </CardFooter>
    </Card>
  );
}
