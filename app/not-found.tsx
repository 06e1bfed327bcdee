import Link from "next/link";
import { NotFoundBody } from "@/components/layout/not-found-body";

export const metadata = { title: "Not found · Gatehouse" };

/** Any unknown URL outside the dashboard's pages: a 404 with the menu and a way back. */
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
      <main id="main" className="mx-auto w-full max-w-6xl flex-1 px-4 py-16">
        <NotFoundBody className="flex flex-col items-start gap-4" />
      </main>
    </div>
  );
}
