"use client";

import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Badge } from "@/components/ui/badge";
import { Button } from "@/components/ui/button";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { Switch } from "@/components/ui/switch";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { apiGet, apiSend } from "@/components/runs/api";
import { NoticeLevelSelect } from "@/components/settings/notice-level";
import type { NoticeLevel } from "@/lib/db/schema";
import type { ChannelView, DeliveryView } from "@/lib/notifications/store";

type Kind = "webhook" | "email" | "slack" | "telegram";

/** The form fields of each kind: [config key, label, placeholder]. `to` is a comma-separated list. */
const FIELDS: Record<Kind, Array<[string, string, string]>> = {
  webhook: [["url", "Endpoint URL", "https://example.com/hooks/gatehouse"]],
  email: [
    ["host", "SMTP host", "smtp.example.com"],
    ["port", "Port", "587"],
    ["username", "Username (optional)", "gatehouse"],
    ["from", "From", "gatehouse@example.com"],
    ["to", "To (comma-separated)", "team@example.com, lead@example.com"],
  ],
  slack: [["channel", "Channel", "#approvals"]],
  telegram: [["chatId", "Chat id", "-1001234567890"]],
};

const SECRET_LABEL: Record<Kind, string> = {
  webhook: "Signing secret (whsec_…)",
  email: "SMTP password",
  slack: "Bot token (xoxb-…)",
  telegram: "Bot token",
};

const TITLES: Record<Kind, string> = { webhook: "Signed webhook", email: "Email (SMTP)", slack: "Slack", telegram: "Telegram" };

const keys = {
  channels: (projectId: string) => ["notifications", projectId, "channels"] as const,
  deliveries: (projectId: string) => ["notifications", projectId, "deliveries"] as const,
};

/** A fresh Standard Webhooks secret, made in the browser: the server never shows one back. */
function newWebhookSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

function toForm(kind: Kind, channel: ChannelView | undefined): Record<string, string> {
  const config = channel?.config ?? {};
  const out: Record<string, string> = {};
  for (const [key] of FIELDS[kind]) {
    const value = config[key];
    out[key] = Array.isArray(value) ? value.join(", ") : value === undefined || value === null ? "" : String(value);
  }
  if (kind === "email") out.secure = config.secure ? "true" : "false";
  return out;
}

function toConfig(kind: Kind, form: Record<string, string>): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const [key] of FIELDS[kind]) {
    const value = (form[key] ?? "").trim();
    if (key === "to") config.to = value.split(",").map((a) => a.trim()).filter(Boolean);
    else if (key === "port") config.port = Number(value);
    else if (key === "username") {
      if (value) config.username = value;
    } else config[key] = value;
  }
  if (kind === "email") config.secure = form.secure === "true";
  return config;
}

function ChannelForm({ projectId, kind, channel }: { projectId: string; kind: Kind; channel: ChannelView | undefined }) {
  const queryClient = useQueryClient();
  const [form, setForm] = useState(() => toForm(kind, channel));
  const [secret, setSecret] = useState("");
  const [generated, setGenerated] = useState(false);
  const [enabled, setEnabled] = useState(channel?.enabled ?? true);
  const [notices, setNotices] = useState<NoticeLevel>(channel?.notices ?? "decisions");
  const [result, setResult] = useState<{ ok: boolean; detail: string } | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: keys.channels(projectId) });

  const save = useMutation({
    mutationFn: () =>
      apiSend<{ channel: ChannelView }>(`/api/projects/${projectId}/notifications/${kind}`, { enabled, notices, config: toConfig(kind, form), ...(secret ? { secret } : {}) }, "PUT"),
    onSuccess: async () => {
      setSecret("");
      setGenerated(false);
      toast.success(`${TITLES[kind]} saved`);
      await refresh();
    },
  });
  const remove = useMutation({
    mutationFn: () => apiSend(`/api/projects/${projectId}/notifications/${kind}`, undefined, "DELETE"),
    onSuccess: async () => {
      setForm(toForm(kind, undefined));
      await refresh();
    },
  });
  const test = useMutation({
    mutationFn: () => apiSend<{ ok: boolean; detail: string }>(`/api/projects/${projectId}/notifications/${kind}/test`),
    onSuccess: setResult,
  });
  const error = save.error ?? remove.error ?? test.error;

  return (
    <form
      className="space-y-3 rounded-md border p-3"
      data-testid={`channel-${kind}`}
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <div className="flex items-center justify-between gap-2">
        <h4 className="text-sm font-semibold">{TITLES[kind]}</h4>
        <div className="flex items-center gap-2">
          {channel ? <Badge variant="outline">{channel.enabled ? "on" : "off"}</Badge> : <Badge variant="secondary">not set</Badge>}
          <Label htmlFor={`${projectId}-${kind}-enabled`} className="text-xs">
            Enabled
          </Label>
          <Switch id={`${projectId}-${kind}-enabled`} checked={enabled} onCheckedChange={setEnabled} />
        </div>
      </div>
      <div className="grid gap-2 sm:grid-cols-2">
        {FIELDS[kind].map(([key, label, placeholder]) => (
          <div key={key} className="space-y-1">
            <Label htmlFor={`${projectId}-${kind}-${key}`} className="text-xs">
              {label}
            </Label>
            <Input
              id={`${projectId}-${kind}-${key}`}
              value={form[key] ?? ""}
              placeholder={placeholder}
              onChange={(e) => setForm({ ...form, [key]: e.target.value })}
            />
          </div>
        ))}
        {kind === "email" && (
          <div className="flex items-center gap-2 pt-5">
            <Switch id={`${projectId}-email-secure`} checked={form.secure === "true"} onCheckedChange={(v) => setForm({ ...form, secure: v ? "true" : "false" })} />
            <Label htmlFor={`${projectId}-email-secure`} className="text-xs">
              Implicit TLS (port 465)
            </Label>
          </div>
        )}
        <NoticeLevelSelect id={`${projectId}-${kind}-notices`} value={notices} onChange={setNotices} />
        <div className="space-y-1 sm:col-span-2">
          <Label htmlFor={`${projectId}-${kind}-secret`} className="text-xs">
            {SECRET_LABEL[kind]}
          </Label>
          <div className="flex gap-2">
            <Input
              id={`${projectId}-${kind}-secret`}
              type={generated ? "text" : "password"}
              autoComplete="off"
              value={secret}
              placeholder={channel?.secret === "set" ? "set (leave empty to keep it)" : "not set"}
              onChange={(e) => {
                setSecret(e.target.value);
                setGenerated(false);
              }}
            />
            {kind === "webhook" && (
              <Button
                type="button"
                variant="outline"
                size="sm"
                onClick={() => {
                  setSecret(newWebhookSecret());
                  setGenerated(true);
                }}
              >
                Generate
              </Button>
            )}
          </div>
          {generated && <p className="text-muted-foreground text-xs">Copy this secret to the receiver now: once saved it is never shown again.</p>}
        </div>
      </div>
      {error && (
        <p role="alert" className="text-destructive text-sm">
          {error.message}
        </p>
      )}
      {result && (
        <p role="status" className={result.ok ? "text-sm text-emerald-600" : "text-destructive text-sm"} data-testid={`channel-${kind}-test-result`}>
          {result.ok ? `Test delivered (${result.detail})` : `Test failed: ${result.detail}`}
        </p>
      )}
      <div className="flex gap-2">
        <Button type="submit" size="sm" disabled={save.isPending}>
          Save
        </Button>
        {channel && (
          <>
            <Button type="button" size="sm" variant="outline" disabled={test.isPending} onClick={() => test.mutate()}>
              Send a test
            </Button>
            <Button type="button" size="sm" variant="ghost" disabled={remove.isPending} onClick={() => remove.mutate()}>
              Remove
            </Button>
          </>
        )}
      </div>
    </form>
  );
}

function DeliveryLog({ projectId }: { projectId: string }) {
  const queryClient = useQueryClient();
  const deliveries = useQuery({
    queryKey: keys.deliveries(projectId),
    queryFn: () => apiGet<{ deliveries: DeliveryView[] }>(`/api/projects/${projectId}/deliveries?limit=50`),
    refetchInterval: 5_000,
  });
  const redeliver = useMutation({
    mutationFn: (id: string) => apiSend(`/api/projects/${projectId}/deliveries/${id}/redeliver`),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.deliveries(projectId) }),
    onError: (e) => toast.error(e.message),
  });
  const rows = deliveries.data?.deliveries ?? [];
  return (
    <div className="space-y-2">
      <h4 className="text-sm font-semibold">Delivery log</h4>
      <Table data-testid="delivery-log">
        <TableHeader>
          <TableRow>
            <TableHead>When</TableHead>
            <TableHead>Channel</TableHead>
            <TableHead>Notice</TableHead>
            <TableHead>Status</TableHead>
            <TableHead className="text-right">Attempts</TableHead>
            <TableHead />
          </TableRow>
        </TableHeader>
        <TableBody>
          {rows.map((d) => (
            <TableRow key={d.id} data-testid="delivery-row">
              <TableCell className="text-xs">{new Date(d.createdAt).toLocaleString()}</TableCell>
              <TableCell className="text-xs break-all whitespace-normal">
                {d.kind}
                {d.recipientUserId ? " (personal)" : ""} → {d.target}
              </TableCell>
              <TableCell className="min-w-48 text-xs break-words whitespace-normal">
                <a className="underline" href={d.url}>
                  {d.title}
                </a>
                {d.lastError && <p className="text-destructive">{d.lastError}</p>}
              </TableCell>
              <TableCell>
                <Badge variant={d.status === "failed" ? "destructive" : d.status === "delivered" ? "outline" : "secondary"}>{d.status}</Badge>
              </TableCell>
              <TableCell className="text-right text-xs">{d.attempts}</TableCell>
              <TableCell className="text-right">
                {d.status === "failed" && (
                  <Button size="sm" variant="outline" disabled={redeliver.isPending} onClick={() => redeliver.mutate(d.id)} data-testid="redeliver">
                    Redeliver
                  </Button>
                )}
              </TableCell>
            </TableRow>
          ))}
          {deliveries.isSuccess && rows.length === 0 && (
            <TableRow>
              <TableCell colSpan={6} className="text-muted-foreground text-sm">
                Nothing sent yet.
              </TableCell>
            </TableRow>
          )}
        </TableBody>
      </Table>
      {deliveries.error && <p className="text-destructive text-sm">{deliveries.error.message}</p>}
    </div>
  );
}

/** A project's notification channels and delivery log (owners): where a gate or question is announced. */
export function ProjectNotifications({ projectId }: { projectId: string }) {
  const channels = useQuery({
    queryKey: keys.channels(projectId),
    queryFn: () => apiGet<{ channels: ChannelView[] }>(`/api/projects/${projectId}/notifications`),
  });
  if (channels.error) return <p className="text-destructive text-sm">{channels.error.message}</p>;
  if (!channels.data) return <p className="text-muted-foreground text-sm">Loading…</p>;
  const byKind = new Map(channels.data.channels.map((c) => [c.kind, c]));
  return (
    <div className="space-y-3" data-testid="project-notifications">
      <p className="text-muted-foreground text-xs">
        When a gate or question opens, its deciders are told here and on their own channels (Settings). Secrets are stored encrypted and never shown again.
      </p>
      {(["webhook", "email", "slack", "telegram"] as const).map((kind) => (
        // Keyed by the saved version, so the form shows what was saved after a save or removal.
        <ChannelForm key={`${kind}:${byKind.get(kind)?.updatedAt ?? "none"}`} projectId={projectId} kind={kind} channel={byKind.get(kind)} />
      ))}
      <DeliveryLog projectId={projectId} />
    </div>
  );
}
