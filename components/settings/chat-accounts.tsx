"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/components/ui/card";
import { apiGet, apiSend } from "@/components/runs/api";
import type { LinkedAccountView } from "@/lib/chat/link";

const KEY = ["chat-links", "me"] as const;

/** Link a Slack or Telegram account: a one-time code, sent to the slash command or the bot. */
export function ChatAccounts() {
  const queryClient = useQueryClient();
  const accounts = useQuery({ queryKey: KEY, queryFn: () => apiGet<{ accounts: LinkedAccountView[] }>("/api/me/chat-links") });
  const create = useMutation({ mutationFn: () => apiSend<{ code: string; expiresAt: string }>("/api/me/chat-links", undefined, "POST") });
  const unlink = useMutation({
    mutationFn: (id: string) => apiSend(`/api/me/chat-links/${id}`, undefined, "DELETE"),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: KEY }),
  });
  const code = create.data?.code;
  return (
    <Card data-testid="chat-accounts">
      <CardHeader>
        <CardTitle>Chat accounts</CardTitle>
        <CardDescription>
          Decide gates and questions, start runs and see what waits for you from Slack or Telegram. A chat account acts as you only once linked, with
          your own role on each project.
        </CardDescription>
      </CardHeader>
      <CardContent className="space-y-3">
        <div className="flex items-center gap-2">
          <Button size="sm" onClick={() => create.mutate()} disabled={create.isPending} data-testid="chat-link-create">
            Create a link code
          </Button>
          {code && (
            <p className="text-sm" data-testid="chat-link-code">
              Send <code className="font-mono">/gatehouse link {code}</code> in Slack, or <code className="font-mono">/link {code}</code> to the
              project&apos;s Telegram bot, within 10 minutes.
            </p>
          )}
        </div>
        {create.error && (
          <p role="alert" className="text-destructive text-sm">
            {create.error.message}
          </p>
        )}
        {accounts.data && accounts.data.accounts.length > 0 && (
          <ul className="space-y-1 text-sm" data-testid="chat-linked-accounts">
            {accounts.data.accounts.map((a) => (
              <li key={a.id} className="flex items-center gap-2">
                <span>
                  {a.provider === "slack" ? "Slack" : "Telegram"} {a.displayName ?? a.externalId}
                </span>
                <Button size="sm" variant="ghost" onClick={() => unlink.mutate(a.id)}>
                  Unlink
                </Button>
              </li>
            ))}
          </ul>
        )}
      </CardContent>
    </Card>
  );
}
