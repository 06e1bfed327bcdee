import { Badge } from "@/components/ui/badge";
import { cn } from "@/lib/utils";

const VARIANT: Record<string, "default" | "secondary" | "destructive" | "outline"> = {
  completed: "default",
  failed: "destructive",
  cancelled: "outline",
};

/** Waiting statuses stand out (amber): they are the ones a person must act on. */
const WAITING = new Set(["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"]);

export function StatusBadge({ status, className }: { status: string; className?: string }) {
  return (
    <Badge
      variant={VARIANT[status] ?? "secondary"}
      data-testid="run-status"
      data-status={status}
      className={cn(
        WAITING.has(status) && "border-amber-500/40 bg-amber-500/15 text-amber-800 dark:text-amber-300",
        status === "running" && "border-sky-500/40 bg-sky-500/15 text-sky-800 dark:text-sky-300",
        className,
      )}
    >
      {status.replaceAll("_", " ")}
    </Badge>
  );
}
