"use client";

import { useState } from "react";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { Textarea } from "@/components/ui/textarea";
import { Markdown } from "@/components/runs/markdown";
import type { Gate, Run } from "@/components/runs/api";
import type { PlanDocument } from "@/lib/workflow/events";
import type { RunEstimate } from "@/lib/runs/estimate-model";
import { EstimateSummary } from "./estimate-table";
import { PlanView } from "./plan-panel";
import { editedPlanBody, PlanEditor, PlanFieldsEditor, type EditableCriterion, type EditableTask, type Validity } from "./plan-editor";
import { useTypedResponse } from "./clarification-form";
import { useDecision } from "./use-decision";
import { ErrorNote } from "./error-note";
import { DeadlineCountdown } from "./deadline-countdown";

/** A plan's tasks and criteria as the editor holds them. */
function editableParts(plan: PlanDocument | null | undefined): { tasks: EditableTask[]; criteria: EditableCriterion[] } {
  return {
    tasks: (plan?.tasks ?? []).map((t) => ({ ...t, files: t.files ?? [], dependsOn: t.dependsOn ?? [] })),
    criteria: (plan?.acceptanceCriteria ?? []).map((c) => ({ ...c })),
  };
}

/**
 * The plan gate: the plan (shown here once, not again in the Plan tab) with the decision beside it — approve, approve an
 * edited plan (Mermaid editor with live preview and server validation, tasks with their files and dependencies,
 * acceptance commands), ask the planner a question (it answers and revises the plan; not a rejection), or reject with
 * feedback.
 */
export function ApprovalCard({ run, gate, plan, children }: { run: Run; gate: Gate; plan: PlanDocument | null; children?: React.ReactNode }) {
  const decision = useDecision(run.id);
  const [mode, setMode] = useState<"view" | "edit" | "reject" | "ask">("view");
  const [notes, setNotes] = useState("");
  const [feedback, setFeedback] = useState("");
  const [question, setQuestion] = useState("");
  const [source, setSource] = useState(plan?.mermaid ?? "");
  const [tasks, setTasks] = useState<EditableTask[]>(() => editableParts(plan).tasks);
  const [criteria, setCriteria] = useState<EditableCriterion[]>(() => editableParts(plan).criteria);
  const [validity, setValidity] = useState<Validity>({ state: "checking" });
  const [feedbackError, setFeedbackError] = useState<string | null>(null);
  const base = { gateId: gate.id, ...(notes.trim() ? { notes: notes.trim() } : {}) };
  const answered = (gate.context as { answered?: { question: string; answer: string } } | null)?.answered;
  const estimate = (gate.context as { estimate?: RunEstimate } | null)?.estimate;
  // A re-plan during implementation: why it was proposed, and the parallel tasks' proposals that joined this gate.
  const replan = gate.context as { replan?: string; joined?: Array<{ taskId: string | null; reason: string }> } | null;
  const startEditing = () => {
    const parts = editableParts(plan);
    setSource(plan?.mermaid ?? "");
    setTasks(parts.tasks);
    setCriteria(parts.criteria);
    setMode("edit");
  };

  return (
    <Card className="border-amber-500/50" data-testid="approval-card">
      <CardHeader>
        <CardTitle>Approve the plan{gate.artifactVersion ? ` (v${gate.artifactVersion})` : ""}</CardTitle>
        <CardDescription>
          Nothing is implemented until you decide. Approve as is, edit the plan first, ask the planner a question, or send it back with feedback.
        </CardDescription>
        <DeadlineCountdown deadline={gate.deadline} />
      </CardHeader>
      <CardContent className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_17rem]">
        <div className="min-w-0 space-y-4" data-testid="approval-plan">
          {answered && (
            <div className="bg-muted/50 rounded-md border p-3 text-sm" data-testid="planner-answer">
              <p>
                <span className="font-medium">You asked: </span>
                {answered.question}
              </p>
              <p className="mt-1">
                <span className="font-medium">The planner answered: </span>
                {answered.answer}
              </p>
              <p className="text-muted-foreground mt-1 text-xs">This is the plan it revised with that answer.</p>
            </div>
          )}
          {replan?.replan && (
            <div className="bg-muted/50 rounded-md border p-3 text-sm" data-testid="replan-reasons">
              <p className="font-medium">Why the run is re-planned</p>
              <ul className="mt-1 list-disc space-y-1 pl-5">
                <li>{replan.replan}</li>
                {(replan.joined ?? []).map((j, i) => (
                  <li key={i} data-testid="replan-joined">
                    {j.reason}
                  </li>
                ))}
              </ul>
              {(replan.joined?.length ?? 0) > 0 && (
                <p className="text-muted-foreground mt-1 text-xs">Several tasks proposed a re-plan: this one decision answers them all, and the plan changes once.</p>
              )}
            </div>
          )}
          {estimate && <EstimateSummary estimate={estimate} />}
          {mode === "edit" ? (
            <>
              <PlanEditor value={source} onChange={setSource} onValidity={setValidity} />
              <PlanFieldsEditor tasks={tasks} criteria={criteria} onTasks={setTasks} onCriteria={setCriteria} />
            </>
          ) : (
            (children ?? (plan ? <PlanView plan={plan} /> : <p className="text-muted-foreground text-sm">The plan is loading from the event log…</p>))
          )}
        </div>
        <div className="flex flex-col gap-4 lg:sticky lg:top-4 lg:self-start" data-testid="approval-decision">
          {mode === "ask" ? (
            <div className="grid gap-2">
              <Label htmlFor="ask-back-question">Your question to the planner</Label>
              <Textarea
                id="ask-back-question"
                value={question}
                onChange={(e) => setQuestion(e.target.value)}
                rows={4}
                aria-invalid={!!feedbackError}
                aria-describedby={feedbackError ? "ask-back-error" : undefined}
                placeholder="e.g. Why does task 2 touch the router?"
              />
              <p className="text-muted-foreground text-xs">The planner answers here with a revised plan. This is not a rejection.</p>
              {feedbackError && (
                <p id="ask-back-error" className="text-destructive text-xs">
                  {feedbackError}
                </p>
              )}
            </div>
          ) : mode === "reject" ? (
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
                <Button variant="outline" data-testid="edit-plan" disabled={!plan} onClick={startEditing}>
                  Edit plan
                </Button>
                <Button variant="outline" data-testid="ask-back" onClick={() => setMode("ask")}>
                  Ask back…
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
                      body: { ...base, editedPlan: editedPlanBody({ mermaid: source, tasks, criteria, summary: plan!.summary }) },
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
            {mode === "ask" && (
              <>
                <Button
                  data-testid="confirm-ask-back"
                  disabled={decision.isPending}
                  onClick={() => {
                    if (!question.trim()) {
                      setFeedbackError("Write the question for the planner.");
                      return;
                    }
                    setFeedbackError(null);
                    decision.mutate({
                      url: `/api/runs/${run.id}/ask-back`,
                      body: { gateId: gate.id, question: question.trim() },
                      success: "Asked; the planner answers with a revised plan",
                    });
                  }}
                >
                  Ask the planner
                </Button>
                <Button variant="ghost" onClick={() => { setMode("view"); setFeedbackError(null); }}>
                  Back
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
        <DeadlineCountdown deadline={gate?.deadline} />
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

/** What a budget gate's amount is in: its label, what to type, the raise suggested when the gate names no limit. */
const BUDGET_UNITS = {
  tokens: { label: "tokens", enter: "a number of tokens", fallback: 10_000 },
  costUsd: { label: "USD", enter: "an amount in dollars", fallback: 1 },
  minutes: { label: "minutes", enter: "a number of minutes", fallback: 30 },
} as const;

/**
 * A budget gate (a stage spent more tokens, money or working time than `budgets.<stage>` allows): raise the budget by an amount, let
 * the implementer finish the task in progress and stop, or cancel the run. None of them fails the run.
 */
export function BudgetCard({ run, gate }: { run: Run; gate: Gate }) {
  const decision = useDecision(run.id);
  const ctx = (gate.context ?? {}) as { reason?: string; stage?: string; metric?: "tokens" | "costUsd" | "minutes"; used?: number; limit?: number };
  const metric = ctx.metric === "costUsd" || ctx.metric === "minutes" ? ctx.metric : "tokens";
  const unit = BUDGET_UNITS[metric];
  // The suggested raise doubles the limit: room for more than the one turn that crossed it.
  const suggested = ctx.limit ?? unit.fallback;
  const [amount, setAmount] = useState(String(metric === "tokens" ? Math.ceil(suggested) : Number(suggested.toFixed(4))));
  const [error, setError] = useState<string | null>(null);
  const raise = () => {
    const n = Number(amount);
    if (!Number.isFinite(n) || n <= 0) return setError(`Enter ${unit.enter} above 0.`);
    if (metric === "tokens" && !Number.isInteger(n)) return setError("Enter a whole number of tokens.");
    setError(null);
    decision.mutate({ url: `/api/runs/${run.id}/budget`, body: { gateId: gate.id, action: "raise", [metric]: n }, success: "Budget raised; the run goes on" });
  };
  return (
    <Card className="border-amber-500/50" data-testid="budget-card" data-metric={metric}>
      <CardHeader>
        <CardTitle>The {ctx.stage ?? "stage"} budget is spent</CardTitle>
        <CardDescription>{ctx.reason ?? "The run spent more than its budget allows."} The run waits for your decision; it does not fail.</CardDescription>
        <DeadlineCountdown deadline={gate.deadline} />
      </CardHeader>
      <CardContent className="space-y-3">
        <div className="grid max-w-xs gap-2">
          <Label htmlFor="budget-amount">Raise by ({unit.label})</Label>
          <Input
            id="budget-amount"
            data-testid="budget-amount"
            inputMode="decimal"
            value={amount}
            onChange={(e) => setAmount(e.target.value)}
            aria-describedby={error ? "budget-amount-error" : undefined}
          />
          {error && (
            <p id="budget-amount-error" className="text-destructive text-xs">
              {error}
            </p>
          )}
        </div>
        <ErrorNote error={decision.error} />
      </CardContent>
      <CardFooter className="flex flex-wrap gap-2">
        <Button data-testid="budget-raise" disabled={decision.isPending} onClick={raise}>
          Raise the budget
        </Button>
        {/* Only implementation has a task in progress to finish (the API refuses it for planning and validation). */}
        {ctx.stage === "implementation" && (
          <Button
            variant="outline"
            data-testid="budget-finish"
            disabled={decision.isPending}
            onClick={() => decision.mutate({ url: `/api/runs/${run.id}/budget`, body: { gateId: gate.id, action: "finish_task" }, success: "The task in progress finishes, then the run stops" })}
          >
            Finish this task, then stop
          </Button>
        )}
        <Button
          variant="destructive"
          data-testid="budget-cancel"
          disabled={decision.isPending}
          onClick={() => decision.mutate({ url: `/api/runs/${run.id}/cancel`, body: { reason: "Cancelled at a budget gate" }, success: "Run cancelled" })}
        >
          Cancel run
        </Button>
      </CardFooter>
    </Card>
  );
}

/** Any other gate (implementation review, escalated question, conflict, timeout): its context, approve or reject. */
export function GateCard({ run, gate }: { run: Run; gate: Gate }) {
  const decision = useDecision(run.id);
  const [notes, setNotes] = useState("");
  const [error, setError] = useState<string | null>(null);
  const ctx = (gate.context ?? {}) as Record<string, unknown>;
  const title: Record<string, string> = {
    implementation: "Review the implementation",
    escalation: "A question needs a full decision",
    timeout: "A stage ran out of time",
    conflict: "The branch conflicts with the base",
    policy: "A risky action needs your approval",
  };
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  // A parallel task's branch conflicting with the run branch (after running again on top of it): both sides, and what
  // approve and reject mean here.
  const choices = (ctx.choices ?? null) as { approve?: string; reject?: string } | null;
  const sides = Array.isArray(ctx.sides) ? (ctx.sides as Array<{ path: string; runBranch: string | null; task: string | null }>) : [];
  if (gate.kind === "conflict" && str(ctx.taskId)) title.conflict = `Task ${str(ctx.taskId)} conflicts with the run branch`;
  // An escalated question is answered in the same typed form as the question itself (choice, file, text).
  const escalation = gate.kind === "escalation";
  const responseType = str(ctx.responseType) ?? "text";
  const options = Array.isArray(ctx.options) ? (ctx.options as string[]) : [];
  const typed = useTypedResponse({ responseType, options, idPrefix: "esc", labelledBy: "gate-question" });
  const approve = async () => {
    const body: Record<string, unknown> = { gateId: gate.id, ...(notes.trim() ? { notes: notes.trim() } : {}) };
    if (escalation) {
      const answer = await typed.read();
      if ("error" in answer) return setError(answer.error);
      body.response = answer.response;
    }
    setError(null);
    decision.mutate({ url: `/api/runs/${run.id}/approve`, body, success: escalation ? "Answer sent; the run resumes" : "Approved" });
  };
  return (
    <Card className="border-amber-500/50" data-testid="gate-card" data-kind={gate.kind} data-response-type={escalation ? responseType : undefined}>
      <CardHeader>
        <CardTitle>{title[gate.kind] ?? `Approve gate ${gate.gateNumber}`}</CardTitle>
        <CardDescription>{escalation ? "Answer to continue, or reject with a reason." : "Approve to continue, or reject with a reason."}</CardDescription>
        <DeadlineCountdown deadline={gate.deadline} />
      </CardHeader>
      <CardContent className="space-y-3">
        {str(ctx.question) && (
          <p className="text-sm font-medium" id="gate-question">
            {str(ctx.question)}
          </p>
        )}
        {str(ctx.context) && <p className="text-muted-foreground text-sm whitespace-pre-wrap">{str(ctx.context)}</p>}
        {escalation ? (
          <div className="space-y-3" data-testid="escalation-answer">
            {typed.inputs}
          </div>
        ) : (
          options.length > 0 && <p className="text-muted-foreground text-xs">Options suggested: {options.join(" · ")}</p>
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
        {sides.map((side) => (
          <div key={side.path} className="grid gap-1 md:grid-cols-2" data-testid="conflict-sides">
            {(["runBranch", "task"] as const).map((which) => (
              <div key={which}>
                <p className="text-muted-foreground text-xs">{which === "runBranch" ? `Run branch · ${side.path}` : `Task ${str(ctx.taskId)} · ${side.path}`}</p>
                <pre className="bg-muted max-h-48 overflow-auto rounded p-2 text-xs">{side[which] ?? "(deleted)"}</pre>
              </div>
            ))}
          </div>
        ))}
        <div className="grid gap-2">
          <Label htmlFor="gate-notes">{escalation ? "Notes, or the reason for a rejection" : "Notes or reason"}</Label>
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
          onClick={() => void approve()}
        >
          {escalation ? "Send answer" : (choices?.approve ?? "Approve")}
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
          {choices?.reject ?? "Reject"}
        </Button>
      </CardFooter>
    </Card>
  );
}

/**
 * A paused run: why, and retry (or extend after a timeout). Paused for an invalid plan, the planner's plan can also be
 * fixed by hand: the diagram (checked against Mermaid's grammar), tasks and acceptance commands, and the run goes on
 * with that plan.
 */
export function PausedCard({ run }: { run: Run }) {
  const decision = useDecision(run.id);
  const reason = run.pauseReason;
  const draft = reason?.reason === "invalid_plan" ? (reason.plan ?? null) : null;
  const [fixing, setFixing] = useState(false);
  const [source, setSource] = useState(draft?.mermaid ?? "");
  const [tasks, setTasks] = useState<EditableTask[]>(() => editableParts(draft).tasks);
  const [criteria, setCriteria] = useState<EditableCriterion[]>(() => editableParts(draft).criteria);
  const [validity, setValidity] = useState<Validity>({ state: "checking" });
  return (
    <Card className="border-amber-500/50" data-testid="paused-card">
      <CardHeader>
        <CardTitle>Paused{reason ? `: ${reason.reason.replaceAll("_", " ")}` : ""}</CardTitle>
        <CardDescription>{reason?.message ?? "The run is waiting to be resumed."}</CardDescription>
      </CardHeader>
      <CardContent className="space-y-4">
        {fixing && (
          <>
            <PlanEditor value={source} onChange={setSource} onValidity={setValidity} />
            {tasks.length > 0 && <PlanFieldsEditor tasks={tasks} criteria={criteria} onTasks={setTasks} onCriteria={setCriteria} />}
          </>
        )}
        <ErrorNote error={decision.error} />
      </CardContent>
      <CardFooter className="flex gap-2">
        {fixing ? (
          <>
            <Button
              data-testid="resume-with-plan"
              disabled={decision.isPending || validity.state !== "valid"}
              onClick={() =>
                decision.mutate({
                  url: `/api/runs/${run.id}/resume`,
                  body: {
                    editedPlan: tasks.length
                      ? editedPlanBody({ mermaid: source, tasks, criteria, summary: draft?.summary })
                      : { mermaid: source },
                  },
                  success: "Resumed with the fixed plan",
                })
              }
            >
              Continue with this plan
            </Button>
            <Button variant="ghost" onClick={() => setFixing(false)}>
              Back
            </Button>
          </>
        ) : (
          <>
            <Button disabled={decision.isPending} onClick={() => decision.mutate({ url: `/api/runs/${run.id}/retry`, success: "Resumed" })}>
              Retry
            </Button>
            {reason?.reason === "invalid_plan" && (
              <Button
                variant="outline"
                data-testid="fix-plan"
                onClick={() => {
                  // Seeded from this pause's draft (the card may have stayed mounted since an earlier pause).
                  const parts = editableParts(draft);
                  setSource(draft?.mermaid ?? "");
                  setTasks(parts.tasks);
                  setCriteria(parts.criteria);
                  setFixing(true);
                }}
              >
                Fix the plan by hand
              </Button>
            )}
            {reason?.reason === "timeout" && (
              <Button variant="outline" disabled={decision.isPending} onClick={() => decision.mutate({ url: `/api/runs/${run.id}/extend`, success: "Given more time" })}>
                Extend time
              </Button>
            )}
          </>
        )}
      </CardFooter>
    </Card>
  );
}
