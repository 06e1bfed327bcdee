import Link from "next/link";
import { Button } from "@/components/ui/button";

export const metadata = { title: "Not found · Gatehouse" };

/** Any unknown URL, and a run or project that does not exist: a 404 with a way back. */
export default function NotFound() {
  return (
    <div className="flex min-h-screen flex-col">
      <header className="border-b">
        <nav className="mx-auto flex min-h-14 max-w-6xl flex-wrap items-center gap-x-5 gap-y-2 px-4 py-2" aria-label="Main">
          <Link href="/" className="font-semibold tracking-tight">
            Gatehouse
          </Link>
          <Link href="/" className="text-muted-foreground hover:text-foreground text-sm">
            Runs
          </Link>
          <Link href="/projects" className="text-muted-foreground hover:text-foreground text-sm">
            Projects
          </Link>
          <Link href="/settings" className="text-muted-foreground hover:text-foreground text-sm">
            Settings
          </Link>
        </nav>
      </header>
      <main id="main" className="mx-auto flex w-full max-w-6xl flex-1 flex-col items-start gap-4 px-4 py-16" data-testid="not-found">
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
      </main>
    </div>
  );
}
