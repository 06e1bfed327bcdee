import { Badge } from "@/components/ui/badge";
import { statusLabel, type RunOutcome } from "@/lib/runs/outcome";
import { cn } from "@/lib/utils";

const VARIANT: Record<string, "default" | "secondary" | "destructive" | "outline"> = {
  completed: "default",
  failed: "destructive",
  cancelled: "outline",
};

/** Waiting statuses stand out (amber): they are the ones a person must act on. */
const WAITING = new Set(["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"]);

/** A run's status; a run accepted after failed validation never shows the plain "completed" of a clean pass. */
export function StatusBadge({ status, outcome = null, className }: { status: string; outcome?: RunOutcome; className?: string }) {
  const acceptedAnyway = status === "completed" && outcome === "accepted_failed_validation";
  return (
    <Badge
      variant={acceptedAnyway ? "outline" : (VARIANT[status] ?? "secondary")}
      data-testid="run-status"
      data-status={status}
      data-outcome={outcome ?? undefined}
      title={acceptedAnyway ? "Completed: a person accepted it after validation failed" : undefined}
      className={cn(
        WAITING.has(status) && "border-amber-500/40 bg-amber-500/15 text-amber-800 dark:text-amber-300",
        status === "running" && "border-sky-500/40 bg-sky-500/15 text-sky-800 dark:text-sky-300",
        acceptedAnyway && "border-orange-500/50 bg-orange-500/10 text-orange-800 dark:text-orange-300",
        className,
      )}
    >
      {statusLabel({ status, outcome })}
    </Badge>
  );
}
