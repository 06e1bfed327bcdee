import Link from "next/link";
import { requirePageUser } from "@/app/_server/session";
import { ThemeToggle } from "@/components/layout/theme-toggle";
import { SignOutButton } from "@/components/auth/sign-out-button";
import { InboxLink } from "@/components/layout/inbox-link";
import { Button } from "@/components/ui/button";
import { Toaster } from "@/components/ui/sonner";

export const dynamic = "force-dynamic";

export default async function DashboardLayout({ children }: { children: React.ReactNode }) {
  const user = await requirePageUser();
  return (
    <div className="flex min-h-screen flex-col">
      <a href="#main" className="focus:bg-background sr-only focus:not-sr-only focus:absolute focus:top-2 focus:left-2 focus:z-50 focus:rounded focus:p-2">
        Skip to content
      </a>
      <header className="border-b">
        <nav className="mx-auto flex min-h-14 max-w-6xl flex-wrap items-center gap-x-5 gap-y-2 px-4 py-2" aria-label="Main">
          <Link href="/" className="font-semibold tracking-tight">
            Gatehouse
          </Link>
          <Link href="/" className="text-muted-foreground hover:text-foreground text-sm">
            Runs
          </Link>
          <InboxLink />
          <Link href="/projects" className="text-muted-foreground hover:text-foreground text-sm">
            Projects
          </Link>
          <Link href="/settings" className="text-muted-foreground hover:text-foreground text-sm">
            Settings
          </Link>
          <div className="ml-auto flex items-center gap-2">
            <Button asChild size="sm">
              <Link href="/runs/new">New run</Link>
            </Button>
            <span className="text-muted-foreground max-w-32 truncate text-sm" data-testid="current-user">
              {user.name ?? user.id}
            </span>
            <ThemeToggle />
            <SignOutButton />
          </div>
        </nav>
      </header>
      <main id="main" className="mx-auto w-full max-w-6xl flex-1 px-4 py-6">
        {children}
      </main>
      {/* Bottom centre: not under Next's dev indicator (bottom left) nor over the run page's timeline (right). */}
      <Toaster richColors closeButton position="bottom-center" />
    </div>
  );
}
