"use client";

import Link from "next/link";
import { usePathname, useRouter, useSearchParams } from "next/navigation";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Badge } from "@/components/ui/badge";
import { Button } from "@/components/ui/button";
import { Card, CardContent } from "@/components/ui/card";
import { Skeleton } from "@/components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { apiGet, apiSend, runKeys } from "@/components/runs/api";
import { humanize } from "@/lib/dashboard/format";
import { Age } from "@/components/layout/client-time";
import type { InboxFilter, InboxItem } from "@/lib/runs/inbox";
import { cn } from "@/lib/utils";
import { INBOX_FILTER_LABELS, inboxKeys, type InboxPage } from "./api";
import { InboxDeadline } from "./inbox-deadline";

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

const FILTERS = Object.keys(INBOX_FILTER_LABELS) as InboxFilter[];

function isFilter(value: string | null): value is InboxFilter {
  return !!value && Object.hasOwn(INBOX_FILTER_LABELS, value);
}

const EMPTY: Record<InboxFilter, string> = {
  open: "Nothing waits for you: no open gate or question in your projects.",
  unread: "Nothing unread.",
  done: "Nothing done yet.",
  all: "No gates or questions in your projects yet.",
};

/**
 * The caller's inbox: the gates and questions they may decide across their projects, filtered (open, unread, done,
 * all), each linking to its card on the run page, with mark read / unread / done. Refreshed by the inbox stream the
 * navigation keeps open.
 */
export function InboxView() {
  const router = useRouter();
  const pathname = usePathname();
  const search = useSearchParams();
  const param = search.get("filter");
  const filter: InboxFilter = isFilter(param) ? param : "open";
  const queryClient = useQueryClient();
  const list = useQuery({
    queryKey: inboxKeys.list(filter),
    queryFn: () => apiGet<InboxPage>(`/api/inbox?filter=${filter}`),
  });
  const mark = useMutation({
    mutationFn: ({ id, action }: { id: string; action: "read" | "unread" | "done" }) => apiSend<{ item: InboxItem }>(`/api/inbox/${encodeURIComponent(id)}`, { action }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: runKeys.inbox }),
    onError: (error) => toast.error(error.message),
  });

  return (
    <div className="space-y-4">
      <div role="group" aria-label="Filter the inbox" className="bg-muted inline-flex w-fit flex-wrap rounded-lg p-[3px]">
        {FILTERS.map((key) => (
          <button
            key={key}
            type="button"
            aria-pressed={filter === key}
            data-testid={`inbox-filter-${key}`}
            onClick={() => router.replace(key === "open" ? pathname : `${pathname}?filter=${key}`)}
            className={cn(
              "focus-visible:ring-ring/50 rounded-md px-3 py-1 text-sm font-medium outline-none focus-visible:ring-[3px]",
              filter === key ? "bg-background text-foreground shadow-sm dark:bg-input/30" : "text-muted-foreground hover:text-foreground",
            )}
          >
            {INBOX_FILTER_LABELS[key]}
            {key === "unread" && list.data ? ` (${list.data.unread})` : ""}
          </button>
        ))}
      </div>

      {list.isPending ? (
        <div className="space-y-2">
          <Skeleton className="h-10 w-full" />
          <Skeleton className="h-10 w-full" />
        </div>
      ) : list.isError ? (
        <p className="text-destructive text-sm">{list.error.message}</p>
      ) : list.data.items.length === 0 ? (
        <Card>
          <CardContent className="text-muted-foreground py-8 text-center text-sm" data-testid="inbox-empty">
            {EMPTY[filter]}
          </CardContent>
        </Card>
      ) : (
        <div className="overflow-x-auto rounded-md border">
          <Table data-testid="inbox-table">
            <TableHeader>
              <TableRow>
                <TableHead>Decision</TableHead>
                <TableHead className="hidden md:table-cell">Project</TableHead>
                <TableHead className="text-right">Opened</TableHead>
                <TableHead>State</TableHead>
                <TableHead className="text-right">
                  <span className="sr-only">Actions</span>
                </TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {list.data.items.map((item) => (
                <TableRow
                  key={item.id}
                  data-testid="inbox-item"
                  data-item-id={item.id}
                  data-read={item.read}
                  data-done={item.done}
                  className={cn(!item.read && "font-medium")}
                >
                  <TableCell className="max-w-[22rem] md:max-w-xl">
                    <div className="flex items-center gap-2">
                      <Badge variant="outline">{item.kind === "gate" ? `${capitalize(humanize(item.gateKind))} gate` : "Question"}</Badge>
                      <Link href={item.link} className="truncate hover:underline focus-visible:underline" title={item.summary} data-testid="inbox-item-link">
                        {item.summary}
                      </Link>
                    </div>
                    <div className="flex items-center gap-2">
                      <p className="text-muted-foreground truncate text-xs font-normal" title={item.runTitle}>
                        {item.runTitle}
                      </p>
                      <InboxDeadline item={item} />
                    </div>
                    {item.decision && (
                      <p className="text-xs font-normal" data-testid="inbox-item-decision">
                        {item.decision}
                      </p>
                    )}
                  </TableCell>
                  <TableCell className="text-muted-foreground hidden max-w-[10rem] truncate font-normal md:table-cell">{item.projectName}</TableCell>
                  <TableCell className="text-muted-foreground text-right font-normal tabular-nums">
                    <Age iso={item.openedAt} tickMs={5_000} />
                  </TableCell>
                  <TableCell data-testid="inbox-item-state">
                    {item.done ? (
                      <Badge variant="secondary">{item.doneReason === "decided" ? "Decided" : "Done"}</Badge>
                    ) : item.read ? (
                      <Badge variant="outline">Read</Badge>
                    ) : (
                      <Badge className="bg-amber-500 text-white dark:text-black">New</Badge>
                    )}
                  </TableCell>
                  <TableCell className="text-right">
                    <div className="flex justify-end gap-1">
                      {item.doneReason !== "decided" && (
                        <Button
                          variant="ghost"
                          size="sm"
                          disabled={mark.isPending}
                          data-testid={item.read ? "inbox-mark-unread" : "inbox-mark-read"}
                          onClick={() => mark.mutate({ id: item.id, action: item.read ? "unread" : "read" })}
                        >
                          {item.read ? "Mark unread" : "Mark read"}
                        </Button>
                      )}
                      {!item.done && (
                        <Button
                          variant="ghost"
                          size="sm"
                          disabled={mark.isPending}
                          data-testid="inbox-mark-done"
                          title="Take it off your open list without deciding it; it stays open for the run and for others"
                          onClick={() => mark.mutate({ id: item.id, action: "done" })}
                        >
                          Mark done
                        </Button>
                      )}
                    </div>
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        </div>
      )}
      {list.data?.truncated && <p className="text-muted-foreground text-xs">Showing the newest {list.data.items.length}.</p>}
    </div>
  );
}
