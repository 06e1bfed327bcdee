"use client";

import { useState } from "react";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Label } from "@/components/ui/label";
import { Textarea } from "@/components/ui/textarea";
import { Markdown } from "@/components/runs/markdown";
import type { Gate, Run } from "@/components/runs/api";
import { useDecision } from "./use-decision";
import { ErrorNote } from "./error-note";

/** The scope a plan gate about scope asks for (inngest/run/validate.ts), or null for a plan gate about a drafted plan. */
export function scopeOf(gate: Gate | null): { files: string[]; attempt: number } | null {
  const scope = (gate?.context as { scope?: { files?: string[]; attempt?: number } } | null)?.scope;
  return scope ? { files: scope.files ?? [], attempt: scope.attempt ?? 1 } : null;
}

/**
 * The plan gate about a change of scope: the implementation changed files no task of the approved plan names. Approve
 * the wider scope (validated again with it), send the work back to implementation (with a note; those files are restored to the run's base, not kept), or cancel the run.
 */
export function ScopeGateCard({ run, gate }: { run: Run; gate: Gate }) {
  const decision = useDecision(run.id);
  const [notes, setNotes] = useState("");
  const scope = scopeOf(gate)!;
  const report = (gate.context as { report?: string } | null)?.report;
  const note = notes.trim();
  return (
    <Card className="border-amber-500/50" data-testid="scope-gate">
      <CardHeader>
        <CardTitle>The work changed files outside the approved plan</CardTitle>
        <CardDescription>
          Attempt {scope.attempt} changed {scope.files.length} file(s) no task of the plan names. The plan is a contract: a wider scope needs
          your approval.
        </CardDescription>
      </CardHeader>
      <CardContent className="space-y-3">
        <ul className="list-disc pl-5 font-mono text-sm" data-testid="scope-files">
          {scope.files.map((f) => (
            <li key={f}>{f}</li>
          ))}
        </ul>
        {report && (
          <details>
            <summary className="cursor-pointer text-sm">Validation report</summary>
            <Markdown>{report}</Markdown>
          </details>
        )}
        <div className="grid gap-2">
          <Label htmlFor="scope-notes">Note for the implementer (optional)</Label>
          <Textarea id="scope-notes" value={notes} onChange={(e) => setNotes(e.target.value)} rows={2} />
        </div>
        <ErrorNote error={decision.error} />
      </CardContent>
      <CardFooter className="flex flex-wrap gap-2">
        <Button
          data-testid="scope-approve"
          disabled={decision.isPending}
          onClick={() => decision.mutate({ url: `/api/runs/${run.id}/approve`, body: { gateId: gate.id, ...(note ? { notes: note } : {}) }, success: "Wider scope approved" })}
        >
          Approve the wider scope
        </Button>
        <Button
          variant="outline"
          data-testid="scope-back"
          title="The files outside the plan are restored to the run's base (not kept), and the implementer is told why."
          disabled={decision.isPending}
          onClick={() =>
            decision.mutate({
              url: `/api/runs/${run.id}/reject`,
              body: { gateId: gate.id, feedback: note || "Keep to the approved plan's files." },
              success: "Sent back to implementation",
            })
          }
        >
          Back to implementation
        </Button>
        <Button
          variant="destructive"
          data-testid="scope-cancel"
          disabled={decision.isPending}
          onClick={() => decision.mutate({ url: `/api/runs/${run.id}/cancel`, success: "Run cancelled" })}
        >
          Cancel the run
        </Button>
      </CardFooter>
    </Card>
  );
}
