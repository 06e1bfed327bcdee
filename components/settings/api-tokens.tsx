"use client";

import { useCallback, useEffect, useState } from "react";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/components/ui/table";
import { LocalTime } from "@/components/layout/client-time";

type Token = { id: string; name: string; prefix: string; createdAt: string; revokedAt: string | null };

async function api<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, { ...init, headers: { "content-type": "application/json", ...init?.headers } });
  if (!res.ok) {
    const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
    throw new Error(body?.error?.message ?? `Request failed (${res.status})`);
  }
  return (res.status === 204 ? null : await res.json()) as T;
}

/** Create and revoke API tokens; a new token is shown once, here, and never again. */
export function ApiTokens() {
  const [tokens, setTokens] = useState<Token[] | null>(null);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = useCallback(async () => {
    try {
      setTokens((await api<{ tokens: Token[] }>("/api/tokens")).tokens);
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);
  useEffect(() => {
    void load();
  }, [load]);

  async function create(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    try {
      const res = await api<{ name: string; token: string }>("/api/tokens", { method: "POST", body: JSON.stringify({ name }) });
      setCreated(res);
      setName("");
      await load();
    } catch (e) {
      setError((e as Error).message);
    }
  }

  async function revoke(id: string) {
    setError(null);
    try {
      await api(`/api/tokens/${id}`, { method: "DELETE" });
      await load();
    } catch (e) {
      setError((e as Error).message);
    }
  }

  return (
    <Card>
      <CardHeader>
        <CardTitle>API tokens</CardTitle>
        <CardDescription>
          For scripts and other clients: send <code>Authorization: Bearer &lt;token&gt;</code>. A token acts as you.
        </CardDescription>
      </CardHeader>
      <CardContent className="space-y-4">
        <form onSubmit={create} className="flex items-end gap-2">
          <div className="flex-1 space-y-2">
            <Label htmlFor="token-name">Name</Label>
            <Input id="token-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. CI" maxLength={100} required />
          </div>
          <Button type="submit" data-testid="create-token">
            Create token
          </Button>
        </form>
        {created ? (
          <div role="status" className="rounded-md border p-3 text-sm" data-testid="new-token">
            <p className="font-medium">Copy “{created.name}” now — it will not be shown again:</p>
            <div className="mt-2 flex items-start gap-2">
              <code className="bg-muted block flex-1 rounded px-2 py-1 break-all select-all" data-testid="new-token-value">
                {created.token}
              </code>
              <CopyButton text={created.token} />
            </div>
          </div>
        ) : null}
        {error ? (
          <p role="alert" className="text-destructive text-sm">
            {error}
          </p>
        ) : null}
        <Table>
          <TableHeader>
            <TableRow>
              <TableHead>Name</TableHead>
              <TableHead>Token</TableHead>
              <TableHead>Created</TableHead>
              <TableHead className="text-right">Status</TableHead>
            </TableRow>
          </TableHeader>
          <TableBody>
            {(tokens ?? []).map((t) => (
              <TableRow key={t.id} data-testid="token-row">
                <TableCell>{t.name}</TableCell>
                <TableCell>
                  <code>{t.prefix}…</code>
                </TableCell>
                <TableCell>
                  <LocalTime iso={t.createdAt} />
                </TableCell>
                <TableCell className="text-right">
                  {t.revokedAt ? (
                    <span className="text-muted-foreground text-sm">revoked</span>
                  ) : (
                    <Button variant="outline" size="sm" onClick={() => revoke(t.id)} data-testid="revoke-token">
                      Revoke
                    </Button>
                  )}
                </TableCell>
              </TableRow>
            ))}
            {tokens && tokens.length === 0 ? (
              <TableRow>
                <TableCell colSpan={4} className="text-muted-foreground text-sm">
                  No tokens yet.
                </TableCell>
              </TableRow>
            ) : null}
          </TableBody>
        </Table>
      </CardContent>
    </Card>
  );
}

/** Copies the new token; says so (or that the browser refused, e.g. without clipboard permission: select it instead). */
function CopyButton({ text }: { text: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  return (
    <Button
      type="button"
      variant="outline"
      size="sm"
      data-testid="copy-token"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setState("copied");
        } catch {
          setState("failed");
        }
      }}
    >
      {state === "copied" ? "Copied" : state === "failed" ? "Copy failed: select it" : "Copy"}
    </Button>
  );
}
