"use client";

import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { apiGet, apiSend } from "@/components/runs/api";
import type { ChannelView } from "@/lib/notifications/store";
import type { NoticeLevel } from "@/lib/db/schema";
import { NoticeLevelSelect } from "./notice-level";

const KEY = ["notifications", "me"] as const;

function PersonalChannel({ kind, channel }: { kind: "email" | "telegram"; channel: ChannelView | undefined }) {
  const queryClient = useQueryClient();
  const field = kind === "email" ? "address" : "chatId";
  const [value, setValue] = useState(String(channel?.config[field] ?? ""));
  const [notices, setNotices] = useState<NoticeLevel>(channel?.notices ?? "decisions");
  const refresh = () => queryClient.invalidateQueries({ queryKey: KEY });
  const save = useMutation({
    mutationFn: () => apiSend(`/api/me/notifications/${kind}`, { enabled: true, notices, config: { [field]: value.trim() } }, "PUT"),
    onSuccess: async () => {
      toast.success(kind === "email" ? "Email saved" : "Telegram chat saved");
      await refresh();
    },
  });
  const remove = useMutation({
    mutationFn: () => apiSend(`/api/me/notifications/${kind}`, undefined, "DELETE"),
    onSuccess: async () => {
      setValue("");
      await refresh();
    },
  });
  const error = save.error ?? remove.error;
  return (
    <form
      className="space-y-2"
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Label htmlFor={`me-${kind}`}>{kind === "email" ? "Email address" : "Telegram chat id"}</Label>
      <div className="flex gap-2">
        <Input
          id={`me-${kind}`}
          value={value}
          onChange={(e) => setValue(e.target.value)}
          placeholder={kind === "email" ? "you@example.com" : "123456789 (message the project's bot, then ask it for your chat id)"}
        />
        <Button type="submit" size="sm" disabled={save.isPending}>
          Save
        </Button>
        {channel && (
          <Button type="button" size="sm" variant="ghost" onClick={() => remove.mutate()}>
            Remove
          </Button>
        )}
      </div>
      <NoticeLevelSelect id={`me-${kind}-notices`} value={notices} onChange={setNotices} />
      {error && (
        <p role="alert" className="text-destructive text-sm">
          {error.message}
        </p>
      )}
    </form>
  );
}

/** Where the caller is told of gates and questions they may decide, besides each project's own channels. */
export function PersonalNotifications() {
  const channels = useQuery({ queryKey: KEY, queryFn: () => apiGet<{ channels: ChannelView[] }>("/api/me/notifications") });
  const byKind = new Map((channels.data?.channels ?? []).map((c) => [c.kind, c]));
  return (
    <Card data-testid="personal-notifications">
      <CardHeader>
        <CardTitle>Notifications</CardTitle>
        <CardDescription>
          When a gate or question opens that you may decide (and, as you choose, when runs end or pause), you are told here too: by email through the project's SMTP server, on Telegram through the
          project's bot (when the project has set them up).
        </CardDescription>
      </CardHeader>
      <CardContent className="space-y-4">
        {channels.error && <p className="text-destructive text-sm">{channels.error.message}</p>}
        {channels.data && (
          <>
            <PersonalChannel key={`email:${byKind.get("email")?.updatedAt ?? ""}`} kind="email" channel={byKind.get("email")} />
            <PersonalChannel key={`telegram:${byKind.get("telegram")?.updatedAt ?? ""}`} kind="telegram" channel={byKind.get("telegram")} />
          </>
        )}
      </CardContent>
    </Card>
  );
}
