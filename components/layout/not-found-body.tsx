import Link from "next/link";
import { Button } from "@/components/ui/button";

/** The 404's message and its ways back: inside the dashboard (under its menu) and on its own (app/not-found.tsx). */
export function NotFoundBody({ className }: { className?: string }) {
  return (
    <div className={className} data-testid="not-found">
      <p className="text-muted-foreground font-mono text-sm">404</p>
      <h1 className="text-2xl font-semibold tracking-tight">This page does not exist</h1>
      <p className="text-muted-foreground max-w-prose text-sm">
        The address may be mistyped, or the run or project it points to was removed or belongs to a project you are not a member of.
      </p>
      <div className="flex gap-2">
        <Button asChild>
          <Link href="/">Back to runs</Link>
        </Button>
        <Button asChild variant="outline">
          <Link href="/runs/new">Start a run</Link>
        </Button>
      </div>
    </div>
  );
}
