"use client";

import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Badge } from "@/components/ui/badge";
import { Button } from "@/components/ui/button";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { RadioGroup, RadioGroupItem } from "@/components/ui/radio-group";
import { Textarea } from "@/components/ui/textarea";
import { apiGet, apiSend, runKeys, type Project } from "@/components/runs/api";
import type { McpServerView } from "@/lib/projects/mcp-servers";

/*
 * A project's own MCP servers (owners; issue #38): listed, added (stdio command/args/env, or a remote URL with
 * headers), removed, and the policy on each server's tools. Header values are secrets: typed into password fields,
 * sent once, stored encrypted; the server never sends them back (a header shows as set).
 */

const key = (projectId: string) => ["projects", projectId, "mcp-servers"] as const;

type Verdict = "allow" | "ask" | "deny";
type Header = { name: string; value: string };

/** `KEY=value` lines → an object (blank lines skipped), or the line that is not one. */
function parseEnv(text: string): { env: Record<string, string> } | { error: string } {
  const env: Record<string, string> = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const at = line.indexOf("=");
    if (at <= 0) return { error: `"${line}" is not KEY=value.` };
    env[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  return { env };
}

function describe(server: McpServerView): string {
  const c = server.config as { type?: string; command?: string; args?: string[]; url?: string; cwd?: string };
  if (c.type === "stdio") return [c.command, ...(c.args ?? [])].join(" ") + (c.cwd ? `  (in ${c.cwd})` : "");
  return `${c.url ?? ""}${c.type === "sse" ? "  (SSE)" : ""}`;
}

function PolicySelect({ project, server }: { project: Project; server: string }) {
  const queryClient = useQueryClient();
  const config = (project.defaultConfig ?? {}) as Record<string, unknown> & { policy?: Record<string, unknown> & { mcp?: Record<string, Verdict> } };
  const rules = config.policy?.mcp ?? {};
  const current = rules[`${server}.*`] ?? "";
  const perTool = Object.entries(rules).filter(([k]) => k.startsWith(`${server}.`) && k !== `${server}.*`);
  const save = useMutation({
    mutationFn: (verdict: Verdict | "") => {
      const mcp = { ...rules };
      if (verdict) mcp[`${server}.*`] = verdict;
      else delete mcp[`${server}.*`];
      return apiSend(`/api/projects/${project.id}`, { defaultConfig: { ...config, policy: { ...(config.policy ?? {}), mcp } } }, "PATCH");
    },
    onSuccess: async () => {
      toast.success(`Policy of ${server}'s tools saved`);
      await queryClient.invalidateQueries({ queryKey: runKeys.projects });
    },
    onError: (e) => toast.error(e.message),
  });
  const id = `${project.id}-mcp-policy-${server}`;
  return (
    <div className="flex flex-wrap items-center gap-2 text-xs">
      <Label htmlFor={id} className="text-xs">
        Its tools
      </Label>
      <select
        id={id}
        data-testid={`mcp-policy-${server}`}
        className="border-input bg-background h-8 rounded-md border px-2 text-xs"
        value={current}
        disabled={save.isPending}
        onChange={(e) => save.mutate(e.target.value as Verdict | "")}
      >
        <option value="">allowed (default for a project server)</option>
        <option value="allow">allowed</option>
        <option value="ask">need approval (a policy gate per call)</option>
        <option value="deny">denied</option>
      </select>
      {perTool.length > 0 && (
        <span className="text-muted-foreground">
          per tool: {perTool.map(([k, v]) => `${k.slice(server.length + 1)} ${v}`).join(", ")} (edit in Configure, policy.mcp)
        </span>
      )}
    </div>
  );
}

function AddServer({ projectId, taken }: { projectId: string; taken: Set<string> }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState("");
  const [kind, setKind] = useState<"stdio" | "remote">("stdio");
  const [command, setCommand] = useState("");
  const [args, setArgs] = useState("");
  const [env, setEnv] = useState("");
  const [cwd, setCwd] = useState("");
  const [url, setUrl] = useState("");
  const [sse, setSse] = useState(false);
  const [headers, setHeaders] = useState<Header[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const reset = () => {
    setName("");
    setCommand("");
    setArgs("");
    setEnv("");
    setCwd("");
    setUrl("");
    setSse(false);
    setHeaders([]);
  };
  const save = useMutation({
    mutationFn: (server: Record<string, unknown>) => apiSend<{ server: McpServerView }>(`/api/projects/${projectId}/mcp-servers/${encodeURIComponent(name.trim())}`, { server }, "PUT"),
    onSuccess: async () => {
      toast.success(`MCP server ${name.trim()} saved`);
      reset();
      await queryClient.invalidateQueries({ queryKey: key(projectId) });
    },
  });
  const submit = () => {
    setProblem(null);
    let server: Record<string, unknown>;
    if (kind === "stdio") {
      const parsed = parseEnv(env);
      if ("error" in parsed) return setProblem(`Environment: ${parsed.error}`);
      server = { command: command.trim(), args: args.split("\n").map((a) => a.trim()).filter(Boolean), env: parsed.env, ...(cwd.trim() ? { cwd: cwd.trim() } : {}) };
    } else {
      const named = headers.filter((h) => h.name.trim());
      server = { url: url.trim(), ...(sse ? { type: "sse" } : {}), headers: Object.fromEntries(named.map((h) => [h.name.trim(), h.value])) };
    }
    save.mutate(server);
  };
  const p = `${projectId}-mcp`;
  const replacing = taken.has(name.trim());
  return (
    <form
      className="space-y-3 rounded-md border p-3"
      data-testid="mcp-add"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <h4 className="text-sm font-semibold">Add a server</h4>
      <div className="grid gap-2 sm:grid-cols-2">
        <div className="space-y-1">
          <Label htmlFor={`${p}-name`} className="text-xs">
            Name (letters, digits, _ or -)
          </Label>
          <Input id={`${p}-name`} value={name} placeholder="search" onChange={(e) => setName(e.target.value)} required />
        </div>
        <RadioGroup value={kind} onValueChange={(v) => setKind(v as "stdio" | "remote")} className="flex gap-4 pt-5">
          <div className="flex items-center gap-2">
            <RadioGroupItem value="stdio" id={`${p}-stdio`} />
            <Label htmlFor={`${p}-stdio`} className="text-xs">
              Stdio (runs in the run&apos;s sandbox)
            </Label>
          </div>
          <div className="flex items-center gap-2">
            <RadioGroupItem value="remote" id={`${p}-remote`} />
            <Label htmlFor={`${p}-remote`} className="text-xs">
              Remote (URL)
            </Label>
          </div>
        </RadioGroup>
        {kind === "stdio" ? (
          <>
            <div className="space-y-1">
              <Label htmlFor={`${p}-command`} className="text-xs">
                Command
              </Label>
              <Input id={`${p}-command`} value={command} placeholder="node" onChange={(e) => setCommand(e.target.value)} />
            </div>
            <div className="space-y-1">
              <Label htmlFor={`${p}-cwd`} className="text-xs">
                Working directory (optional, in the repository)
              </Label>
              <Input id={`${p}-cwd`} value={cwd} placeholder="tools" onChange={(e) => setCwd(e.target.value)} />
            </div>
            <div className="space-y-1">
              <Label htmlFor={`${p}-args`} className="text-xs">
                Arguments (one a line)
              </Label>
              <Textarea id={`${p}-args`} rows={3} className="font-mono text-xs" value={args} placeholder="tools/notes-server.mjs" onChange={(e) => setArgs(e.target.value)} />
            </div>
            <div className="space-y-1">
              <Label htmlFor={`${p}-env`} className="text-xs">
                Environment (KEY=value a line; not for secrets: the sandbox sees it)
              </Label>
              <Textarea id={`${p}-env`} rows={3} className="font-mono text-xs" value={env} placeholder="NOTES_DIR=docs" onChange={(e) => setEnv(e.target.value)} />
            </div>
          </>
        ) : (
          <>
            <div className="space-y-1 sm:col-span-2">
              <Label htmlFor={`${p}-url`} className="text-xs">
                URL (a public address)
              </Label>
              <Input id={`${p}-url`} value={url} placeholder="https://mcp.example.com/mcp" onChange={(e) => setUrl(e.target.value)} />
            </div>
            <div className="flex items-center gap-2 sm:col-span-2">
              <input id={`${p}-sse`} type="checkbox" checked={sse} onChange={(e) => setSse(e.target.checked)} />
              <Label htmlFor={`${p}-sse`} className="text-xs">
                Older SSE transport (else streamable HTTP)
              </Label>
            </div>
            <div className="space-y-2 sm:col-span-2">
              <p className="text-xs">Headers (values are stored encrypted and never shown again)</p>
              {headers.map((h, i) => (
                <div key={i} className="flex gap-2" data-testid="mcp-header-row">
                  <Input
                    aria-label={`Header ${i + 1} name`}
                    value={h.name}
                    placeholder="Authorization"
                    onChange={(e) => setHeaders(headers.map((x, j) => (j === i ? { ...x, name: e.target.value } : x)))}
                  />
                  <Input
                    aria-label={`Header ${i + 1} value`}
                    type="password"
                    autoComplete="off"
                    value={h.value}
                    onChange={(e) => setHeaders(headers.map((x, j) => (j === i ? { ...x, value: e.target.value } : x)))}
                  />
                  <Button type="button" size="sm" variant="ghost" onClick={() => setHeaders(headers.filter((_, j) => j !== i))}>
                    Remove
                  </Button>
                </div>
              ))}
              <Button type="button" size="sm" variant="outline" onClick={() => setHeaders([...headers, { name: "", value: "" }])}>
                Add a header
              </Button>
            </div>
          </>
        )}
      </div>
      {replacing && <p className="text-muted-foreground text-xs">A server named {name.trim()} exists: saving replaces it (its headers too, so enter them again).</p>}
      {(problem ?? save.error) && (
        <p role="alert" className="text-destructive text-sm">
          {problem ?? save.error?.message}
        </p>
      )}
      <Button type="submit" size="sm" disabled={save.isPending}>
        Save server
      </Button>
    </form>
  );
}

/** The project's MCP servers (owners only: the API answers owners alone, reads included). */
export function ProjectMcpServers({ project }: { project: Project }) {
  const queryClient = useQueryClient();
  const servers = useQuery({
    queryKey: key(project.id),
    queryFn: () => apiGet<{ servers: McpServerView[] }>(`/api/projects/${project.id}/mcp-servers`),
  });
  const remove = useMutation({
    mutationFn: (name: string) => apiSend(`/api/projects/${project.id}/mcp-servers/${encodeURIComponent(name)}`, undefined, "DELETE"),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: key(project.id) }),
    onError: (e) => toast.error(e.message),
  });
  if (servers.error) return <p className="text-destructive text-sm">{servers.error.message}</p>;
  if (!servers.data) return <p className="text-muted-foreground text-sm">Loading…</p>;
  const list = servers.data.servers;
  return (
    <div className="space-y-3" data-testid="project-mcp-servers">
      <p className="text-muted-foreground text-xs">
        Tools for the implementer, besides the repository&apos;s own .mcp.json. A stdio server runs inside the run&apos;s sandbox (bubblewrap or E2B, with
        its limits and network rule); a remote one is reached only at a public address. A project server&apos;s tools are allowed unless you say
        otherwise; a repository server&apos;s need approval.
      </p>
      {list.length === 0 && <p className="text-muted-foreground text-sm">No MCP servers yet.</p>}
      {list.map((s) => {
        const env = (s.config as { env?: Record<string, string> }).env ?? {};
        return (
          <div key={s.name} className="space-y-2 rounded-md border p-3" data-testid="mcp-server">
            <div className="flex items-center justify-between gap-2">
              <div className="flex min-w-0 items-center gap-2">
                <span className="font-mono text-sm font-semibold">{s.name}</span>
                <Badge variant="outline">{(s.config as { type?: string }).type === "stdio" ? "stdio" : "remote"}</Badge>
              </div>
              <Button type="button" size="sm" variant="ghost" disabled={remove.isPending} onClick={() => remove.mutate(s.name)}>
                Remove
              </Button>
            </div>
            <p className="font-mono text-xs break-all">{describe(s)}</p>
            {Object.keys(env).length > 0 && <p className="font-mono text-xs break-all">env: {Object.entries(env).map(([k, v]) => `${k}=${v}`).join(" ")}</p>}
            {Object.keys(s.headers).length > 0 && (
              <p className="text-xs" data-testid="mcp-headers">
                headers: {Object.keys(s.headers).map((h) => `${h}: ••••••••`).join(", ")}
              </p>
            )}
            <PolicySelect project={project} server={s.name} />
          </div>
        );
      })}
      <AddServer projectId={project.id} taken={new Set(list.map((s) => s.name))} />
    </div>
  );
}
