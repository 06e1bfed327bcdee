import Link from "next/link";
import { requirePageUser } from "@/app/_server/session";
import { ThemeToggle } from "@/components/layout/theme-toggle";
import { SignOutButton } from "@/components/auth/sign-out-button";

export const dynamic = "force-dynamic";

export default async function DashboardLayout({ children }: { children: React.ReactNode }) {
  const user = await requirePageUser();
  return (
    <div className="flex min-h-screen flex-col">
      <header className="border-b">
        <nav className="mx-auto flex h-14 max-w-6xl items-center gap-6 px-4" aria-label="Main">
          <Link href="/" className="font-semibold tracking-tight">
            Gatehouse
          </Link>
          <Link href="/" className="text-muted-foreground hover:text-foreground text-sm">
            Runs
          </Link>
          <Link href="/settings" className="text-muted-foreground hover:text-foreground text-sm">
            Settings
          </Link>
          <div className="ml-auto flex items-center gap-2">
            <span className="text-muted-foreground text-sm" data-testid="current-user">
              {user.name ?? user.id}
            </span>
            <ThemeToggle />
            <SignOutButton />
          </div>
        </nav>
      </header>
      <main className="mx-auto w-full max-w-6xl flex-1 px-4 py-6">{children}</main>
    </div>
  );
}
