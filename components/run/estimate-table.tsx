"use client";

import { useId } from "react";
import { Badge } from "@/components/ui/badge";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { formatDuration, formatTokens, formatUsd } from "@/lib/dashboard/format";
import type { EstimateReport, Range, RunEstimate, Usage, Verdict } from "@/lib/runs/estimate-model";

const STAGE_NAMES = { implementation: "Implementation", validation: "Validation", delivery: "Delivery" } as const;

function range(r: Range, show: (n: number) => string): string {
  const low = show(r.low);
  const high = show(r.high);
  return low === high ? low : `${low} – ${high}`;
}

const tokens = (n: number) => formatTokens(Math.round(n));
const usd = (n: number) => formatUsd(n);
const time = (ms: number) => formatDuration(ms);

function basisText(estimate: RunEstimate): string {
  const p = estimate.parallel;
  const parallel = p
    ? ` Tasks run side by side (up to ${p.maxConcurrentTasks} at once, in ${p.rounds} round${p.rounds === 1 ? "" : "s"}): implementation's time counts size ${p.wallUnits} of ${estimate.units}; tokens and cost count every task.`
    : "";
  return basisText1(estimate) + parallel;
}

function basisText1(estimate: RunEstimate): string {
  return estimate.basis.kind === "history"
    ? `From ${estimate.basis.runs} earlier completed run${estimate.basis.runs === 1 ? "" : "s"} of this project, scaled to this plan (${estimate.tasks} task${estimate.tasks === 1 ? "" : "s"}, size ${estimate.units}).`
    : `No completed runs in this project yet: per-task guesses priced with the price table (${estimate.tasks} task${estimate.tasks === 1 ? "" : "s"}, size ${estimate.units}). Treat it as a rough range.`;
}

/** The columns both tables share. */
function UsageHeader() {
  return (
    <TableHeader>
      <TableRow>
        <TableHead>Stage</TableHead>
        <TableHead>Tokens</TableHead>
        <TableHead>Cost</TableHead>
        <TableHead>Time</TableHead>
      </TableRow>
    </TableHeader>
  );
}

/** The estimate on the plan card: planning as it stands, a range for each stage ahead, and the total. */
export function EstimateSummary({ estimate }: { estimate: RunEstimate }) {
  return (
    <section className="space-y-2" data-testid="estimate" data-basis={estimate.basis.kind} aria-labelledby="estimate-heading">
      <h3 id="estimate-heading" className="text-sm font-semibold">
        Estimate if approved
      </h3>
      <p className="text-muted-foreground text-xs">{basisText(estimate)}</p>
      <Table className="text-xs">
        <UsageHeader />
        <TableBody>
          <TableRow data-testid="estimate-planning">
            <TableCell>Planning (so far)</TableCell>
            <TableCell>{tokens(estimate.planning.tokens)}</TableCell>
            <TableCell>{usd(estimate.planning.costUsd)}</TableCell>
            <TableCell>{time(estimate.planning.wallMs)}</TableCell>
          </TableRow>
          {(Object.keys(STAGE_NAMES) as Array<keyof typeof STAGE_NAMES>).map((stage) => {
            const s = estimate.stages[stage];
            return (
              <TableRow key={stage} data-testid={`estimate-${stage}`}>
                <TableCell>{STAGE_NAMES[stage]}</TableCell>
                <TableCell>{range(s.tokens, tokens)}</TableCell>
                <TableCell>{range(s.costUsd, usd)}</TableCell>
                <TableCell>{range(s.wallMs, time)}</TableCell>
              </TableRow>
            );
          })}
          <TableRow className="font-medium" data-testid="estimate-total">
            <TableCell>Total</TableCell>
            <TableCell>{range(estimate.total.tokens, tokens)}</TableCell>
            <TableCell>{range(estimate.total.costUsd, usd)}</TableCell>
            <TableCell>{range(estimate.total.wallMs, time)}</TableCell>
          </TableRow>
        </TableBody>
      </Table>
    </section>
  );
}

const VERDICT: Record<Verdict, { text: string; variant: "secondary" | "outline" | "destructive" }> = {
  within: { text: "within", variant: "secondary" },
  below: { text: "below", variant: "outline" },
  above: { text: "above", variant: "destructive" },
};

function Cell({ estimate, actual, verdict, show }: { estimate: Range; actual: number | null; verdict: Verdict | null; show: (n: number) => string }) {
  return (
    <TableCell>
      <div className="text-muted-foreground">est. {range(estimate, show)}</div>
      {actual === null ? (
        <div className="text-muted-foreground">not reached</div>
      ) : (
        <div className="flex items-center gap-1.5">
          <span>{show(actual)}</span>
          {verdict && (
            <Badge variant={VERDICT[verdict].variant} className="px-1 py-0 text-[10px]" data-verdict={verdict}>
              {VERDICT[verdict].text}
            </Badge>
          )}
        </div>
      )}
    </TableCell>
  );
}

/** After the plan gate: the estimate beside what each stage took, so people learn how far to trust it. */
export function EstimateComparison({ report }: { report: EstimateReport }) {
  const { estimate } = report;
  const headingId = useId();
  return (
    <section className="space-y-2" data-testid="estimate-comparison" aria-labelledby={headingId}>
      <h3 id={headingId} className="text-sm font-semibold">
        Estimate and actual (plan v{estimate.planVersion})
      </h3>
      <p className="text-muted-foreground text-xs">{basisText(estimate)} Time is working time, without waits for people.</p>
      <Table className="text-xs">
        <UsageHeader />
        <TableBody>
          {report.stages.map((row) => {
            const a: Usage | null = row.actual;
            return (
              <TableRow key={row.stage} data-testid={`estimate-row-${row.stage}`}>
                <TableCell>{STAGE_NAMES[row.stage]}</TableCell>
                <Cell estimate={row.estimate.tokens} actual={a?.tokens ?? null} verdict={row.verdict?.tokens ?? null} show={tokens} />
                <Cell estimate={row.estimate.costUsd} actual={a?.costUsd ?? null} verdict={row.verdict?.costUsd ?? null} show={usd} />
                <Cell estimate={row.estimate.wallMs} actual={a?.wallMs ?? null} verdict={row.verdict?.wallMs ?? null} show={time} />
              </TableRow>
            );
          })}
        </TableBody>
      </Table>
    </section>
  );
}
