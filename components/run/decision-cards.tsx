"use client";

import { useState } from "react";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Label } from "@/components/ui/label";
import { Textarea } from "@/components/ui/textarea";
import { Markdown } from "@/components/runs/markdown";
import type { Gate, Run } from "@/components/runs/api";
import type { PlanDocument } from "@/lib/workflow/events";
import { PlanView } from "./plan-panel";
import { PlanEditor, type Validity } from "./plan-editor";
import { useDecision } from "./use-decision";

function ErrorNote({ error }: { error: Error | null }) {
  if (!error) return null;
  return (
    <Alert variant="destructive">
      <AlertTitle>That did not go through</AlertTitle>
      <AlertDescription>{error.message}</AlertDescription>
    </Alert>
  );
}

/**
 * The plan gate: the plan (shown here once, not again in the Plan tab) with the decision beside it — approve, approve an
 * edited plan (Mermaid editor, live preview, server validation), or reject with feedback.
 */
export function ApprovalCard({ run, gate, plan, children }: { run: Run; gate: Gate; plan: PlanDocument | null; children?: React.ReactNode }) {
  const decision = useDecision(run.id);
  const [mode, setMode] = useState<"view" | "edit" | "reject">("view");
  const [notes, setNotes] = useState("");
  const [feedback, setFeedback] = useState("");
  const [source, setSource] = useState(plan?.mermaid ?? "");
  const [validity, setValidity] = useState<Validity>({ state: "checking" });
  const [feedbackError, setFeedbackError] = useState<string | null>(null);
  const base = { gateId: gate.id, ...(notes.trim() ? { notes: notes.trim() } : {}) };

  return (
    <Card className="border-amber-500/50" data-testid="approval-card">
      <CardHeader>
        <CardTitle>Approve the plan{gate.artifactVersion ? ` (v${gate.artifactVersion})` : ""}</CardTitle>
        <CardDescription>Nothing is implemented until you decide. Approve as is, edit the diagram first, or send it back with feedback.</CardDescription>
      </CardHeader>
      <CardContent className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_17rem]">
        <div className="min-w-0" data-testid="approval-plan">
          {mode === "edit" ? (
            <PlanEditor value={source} onChange={setSource} onValidity={setValidity} />
          ) : (
            (children ?? (plan ? <PlanView plan={plan} /> : <p className="text-muted-foreground text-sm">The plan is loading from the event log…</p>))
          )}
        </div>
        <div className="flex flex-col gap-4 lg:sticky lg:top-4 lg:self-start" data-testid="approval-decision">
          {mode === "reject" ? (
            <div className="grid gap-2">
              <Label htmlFor="reject-feedback">What should change?</Label>
              <Textarea
                id="reject-feedback"
                value={feedback}
                onChange={(e) => setFeedback(e.target.value)}
                rows={4}
                aria-invalid={!!feedbackError}
                aria-describedby={feedbackError ? "reject-feedback-error" : undefined}
                placeholder="e.g. Split task 2 and add a migration test."
              />
              {feedbackError && (
                <p id="reject-feedback-error" className="text-destructive text-xs">
                  {feedbackError}
                </p>
              )}
            </div>
          ) : (
            <div className="grid gap-2">
              <Label htmlFor="approve-notes">Notes for the implementer (optional)</Label>
              <Textarea id="approve-notes" value={notes} onChange={(e) => setNotes(e.target.value)} rows={2} />
            </div>
          )}
          <ErrorNote error={decision.error} />
          <div className="flex flex-wrap gap-2">
            {mode === "view" && (
              <>
                <Button
                  data-testid="approve"
                  disabled={decision.isPending}
                  onClick={() => decision.mutate({ url: `/api/runs/${run.id}/approve`, body: base, success: "Plan approved" })}
                >
                  Approve
                </Button>
                <Button variant="outline" data-testid="edit-plan" disabled={!plan} onClick={() => setMode("edit")}>
                  Edit plan
                </Button>
                <Button variant="outline" data-testid="reject" onClick={() => setMode("reject")}>
                  Reject…
                </Button>
              </>
            )}
            {mode === "edit" && (
              <>
                <Button
                  data-testid="approve-edited"
                  disabled={decision.isPending || validity.state !== "valid" || !plan}
                  onClick={() =>
                    decision.mutate({
                      url: `/api/runs/${run.id}/approve`,
                      body: { ...base, editedPlan: { mermaid: source, tasks: plan!.tasks, summary: plan!.summary } },
                      success: "Edited plan approved",
                    })
                  }
                >
                  Approve edited plan
                </Button>
                <Button variant="ghost" onClick={() => { setMode("view"); setSource(plan?.mermaid ?? ""); }}>
                  Discard edits
                </Button>
              </>
            )}
            {mode === "reject" && (
              <>
                <Button
                  variant="destructive"
                  data-testid="confirm-reject"
                  disabled={decision.isPending}
                  onClick={() => {
                    if (!feedback.trim()) {
                      setFeedbackError("Say what to change, so the planner can act on it.");
                      return;
                    }
                    setFeedbackError(null);
                    decision.mutate({ url: `/api/runs/${run.id}/reject`, body: { gateId: gate.id, feedback: feedback.trim() }, success: "Sent back for a new plan" });
                  }}
                >
                  Reject with feedback
                </Button>
                <Button variant="ghost" onClick={() => setMode("view")}>
                  Back
                </Button>
              </>
            )}
          </div>
        </div>
      </CardContent>
    </Card>
  );
}

type FixContext = { report?: string; score?: number; attempt?: number; findings?: Array<{ severity?: string; criterion?: string; evidence?: string }> };

/** Validation failed with manual fixes: retry, accept anyway or cancel, beside the report. */
export function FixDecisionCard({ run, gate, fallbackReport }: { run: Run; gate: Gate | null; fallbackReport?: string }) {
  const decision = useDecision(run.id);
  const ctx = (gate?.context ?? {}) as FixContext;
  const report = ctx.report ?? fallbackReport;
  const decide = (value: "retry" | "accept" | "cancel", success: string) =>
    decision.mutate({ url: `/api/runs/${run.id}/fix-decision`, body: { ...(gate ? { gateId: gate.id } : {}), decision: value }, success });
  return (
    <Card className="border-amber-500/50" data-testid="fix-decision-card">
      <CardHeader>
        <CardTitle>Validation failed — what next?</CardTitle>
        <CardDescription>
          {ctx.attempt ? `Attempt ${ctx.attempt}. ` : ""}
          {ctx.score !== undefined ? `Score ${ctx.score}/10. ` : ""}Retry lets the implementer fix the findings; accept delivers it as is.
        </CardDescription>
      </CardHeader>
      <CardContent className="grid gap-4 lg:grid-cols-[1fr_16rem]">
        <div className="min-w-0 space-y-3" data-testid="validation-report">
          {ctx.findings?.length ? (
            <ul className="space-y-1.5 text-sm">
              {ctx.findings.map((f, i) => (
                <li key={i} className="rounded-md border p-2">
                  <span className="font-medium">{f.severity ?? "finding"}</span>
                  {f.criterion && <span className="text-muted-foreground"> · {f.criterion}</span>}
                  {f.evidence && <p className="text-muted-foreground text-xs">{f.evidence}</p>}
                </li>
              ))}
            </ul>
          ) : null}
          {report ? <Markdown>{report}</Markdown> : <p className="text-muted-foreground text-sm">The validator wrote no report.</p>}
        </div>
        <div className="flex flex-col gap-2">
          <Button data-testid="fix-retry" disabled={decision.isPending} onClick={() => decide("retry", "Retrying the fix")}>
            Retry
          </Button>
          <Button variant="outline" data-testid="fix-accept" disabled={decision.isPending} onClick={() => decide("accept", "Accepted anyway")}>
            Accept anyway
          </Button>
          <Button variant="destructive" data-testid="fix-cancel" disabled={decision.isPending} onClick={() => decide("cancel", "Run cancelled")}>
            Cancel run
          </Button>
          <ErrorNote error={decision.error} />
        </div>
      </CardContent>
    </Card>
  );
}

/** Any other gate (implementation review, escalated question, budget, conflict, timeout): its context, approve or reject. */
export function GateCard({ run, gate }: { run: Run; gate: Gate }) {
  const decision = useDecision(run.id);
  const [notes, setNotes] = useState("");
  const [error, setError] = useState<string | null>(null);
  const ctx = (gate.context ?? {}) as Record<string, unknown>;
  const title: Record<string, string> = {
    implementation: "Review the implementation",
    escalation: "A question needs a full decision",
    budget: "The run reached its budget",
    timeout: "A stage ran out of time",
    conflict: "The branch conflicts with the base",
    policy: "A risky action needs your approval",
  };
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  return (
    <Card className="border-amber-500/50" data-testid="gate-card" data-kind={gate.kind}>
      <CardHeader>
        <CardTitle>{title[gate.kind] ?? `Approve gate ${gate.gateNumber}`}</CardTitle>
        <CardDescription>Approve to continue, or reject with a reason.</CardDescription>
      </CardHeader>
      <CardContent className="space-y-3">
        {str(ctx.question) && <p className="text-sm font-medium">{str(ctx.question)}</p>}
        {str(ctx.context) && <p className="text-muted-foreground text-sm whitespace-pre-wrap">{str(ctx.context)}</p>}
        {Array.isArray(ctx.options) && ctx.options.length > 0 && (
          <p className="text-muted-foreground text-xs">Options suggested: {(ctx.options as string[]).join(" · ")}</p>
        )}
        {str(ctx.summary) && <Markdown>{str(ctx.summary)!}</Markdown>}
        {str(ctx.diffStat) && <pre className="bg-muted overflow-x-auto rounded p-2 text-xs">{str(ctx.diffStat)}</pre>}
        {str(ctx.reason) && (
          <p className="text-sm" data-testid="gate-reason">
            <span className="font-medium">Why: </span>
            {str(ctx.reason)}
          </p>
        )}
        {Array.isArray(ctx.files) && ctx.files.length > 0 && (
          <ul className="list-disc pl-5 font-mono text-xs" data-testid="gate-files" aria-label="Files">
            {(ctx.files as string[]).map((f) => (
              <li key={f}>{f}</li>
            ))}
          </ul>
        )}
        <div className="grid gap-2">
          <Label htmlFor="gate-notes">{gate.kind === "escalation" ? "Your answer / decision" : "Notes or reason"}</Label>
          <Textarea id="gate-notes" value={notes} onChange={(e) => setNotes(e.target.value)} rows={3} aria-describedby={error ? "gate-notes-error" : undefined} />
          {error && (
            <p id="gate-notes-error" className="text-destructive text-xs">
              {error}
            </p>
          )}
        </div>
        <ErrorNote error={decision.error} />
      </CardContent>
      <CardFooter className="flex gap-2">
        <Button
          data-testid="gate-approve"
          disabled={decision.isPending}
          onClick={() => decision.mutate({ url: `/api/runs/${run.id}/approve`, body: { gateId: gate.id, ...(notes.trim() ? { notes: notes.trim() } : {}) }, success: "Approved" })}
        >
          Approve
        </Button>
        <Button
          variant="outline"
          data-testid="gate-reject"
          disabled={decision.isPending}
          onClick={() => {
            if (!notes.trim()) return setError("Give a reason for rejecting.");
            setError(null);
            decision.mutate({ url: `/api/runs/${run.id}/reject`, body: { gateId: gate.id, feedback: notes.trim() }, success: "Rejected" });
          }}
        >
          Reject
        </Button>
      </CardFooter>
    </Card>
  );
}

/** A paused run: why, and retry (or extend after a timeout). */
export function PausedCard({ run }: { run: Run }) {
  const decision = useDecision(run.id);
  const reason = run.pauseReason;
  return (
    <Card className="border-amber-500/50" data-testid="paused-card">
      <CardHeader>
        <CardTitle>Paused{reason ? `: ${reason.reason.replaceAll("_", " ")}` : ""}</CardTitle>
        <CardDescription>{reason?.message ?? "The run is waiting to be resumed."}</CardDescription>
      </CardHeader>
      <CardContent>
        <ErrorNote error={decision.error} />
      </CardContent>
      <CardFooter className="flex gap-2">
        <Button disabled={decision.isPending} onClick={() => decision.mutate({ url: `/api/runs/${run.id}/retry`, success: "Resumed" })}>
          Retry
        </Button>
        {reason?.reason === "timeout" && (
          <Button variant="outline" disabled={decision.isPending} onClick={() => decision.mutate({ url: `/api/runs/${run.id}/extend`, success: "Given more time" })}>
            Extend time
          </Button>
        )}
      </CardFooter>
    </Card>
  );
}
