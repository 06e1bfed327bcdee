import { Suspense } from "react";
import { InboxView } from "@/components/inbox/inbox-view";

export const dynamic = "force-dynamic";

export default function InboxPage() {
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">Inbox</h1>
        <p className="text-muted-foreground text-sm">The gates and questions you may decide, across your projects. Read and done are yours alone; an item someone decides is done for everyone.</p>
      </div>
      <Suspense>
        <InboxView />
      </Suspense>
    </div>
  );
}
