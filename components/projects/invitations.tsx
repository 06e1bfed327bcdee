"use client";

import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Alert, AlertDescription } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { apiGet, apiSend, runKeys } from "@/components/runs/api";

type MyInvitation = { id: string; projectId: string; projectName: string; role: string; invitedBy: string | null };
type PendingInvitation = { id: string; email: string; role: string };

const myKey = ["invitations"] as const;
const projectKey = (projectId: string) => ["project", projectId, "invitations"] as const;

/** The signed-in person's pending invitations, to accept or decline. Nothing shows when there are none. */
export function MyInvitations() {
  const queryClient = useQueryClient();
  const invitations = useQuery({
    queryKey: myKey,
    queryFn: () => apiGet<{ invitations: MyInvitation[] }>("/api/invitations").then((b) => b.invitations),
  });
  const decide = useMutation({
    mutationFn: ({ id, decision }: { id: string; decision: "accept" | "decline" }) => apiSend(`/api/invitations/${id}/${decision}`, {}),
    onSuccess: async (_data, { decision }) => {
      toast.success(decision === "accept" ? "Invitation accepted" : "Invitation declined");
      await queryClient.invalidateQueries({ queryKey: myKey });
      await queryClient.invalidateQueries({ queryKey: runKeys.projects });
    },
    onError: (error) => toast.error(error.message),
  });
  if (!invitations.data?.length) return null;
  return (
    <Card data-testid="my-invitations">
      <CardHeader>
        <CardTitle>Invitations</CardTitle>
        <CardDescription>You become a member of a project when you accept.</CardDescription>
      </CardHeader>
      <CardContent className="space-y-2">
        {invitations.data.map((inv) => (
          <div key={inv.id} data-testid="invitation" className="flex flex-wrap items-center justify-between gap-2 text-sm">
            <span>
              <strong>{inv.projectName}</strong> as {inv.role}
              {inv.invitedBy ? ` (from ${inv.invitedBy})` : ""}
            </span>
            <span className="flex gap-2">
              <Button size="sm" disabled={decide.isPending} onClick={() => decide.mutate({ id: inv.id, decision: "accept" })}>
                Accept
              </Button>
              <Button size="sm" variant="outline" disabled={decide.isPending} onClick={() => decide.mutate({ id: inv.id, decision: "decline" })}>
                Decline
              </Button>
            </span>
          </div>
        ))}
      </CardContent>
    </Card>
  );
}

/** Owners invite people by email and see or withdraw the invitations still pending. */
export function ProjectInvitations({ projectId }: { projectId: string }) {
  const queryClient = useQueryClient();
  const [email, setEmail] = useState("");
  const [role, setRole] = useState("viewer");
  const pending = useQuery({
    queryKey: projectKey(projectId),
    queryFn: () => apiGet<{ invitations: PendingInvitation[] }>(`/api/projects/${projectId}/invitations`).then((b) => b.invitations),
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey: projectKey(projectId) });
  const invite = useMutation({
    mutationFn: () => apiSend(`/api/projects/${projectId}/members`, { email: email.trim(), role }),
    onSuccess: async () => {
      toast.success(`Invitation sent to ${email.trim()}`);
      setEmail("");
      await refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => apiSend(`/api/projects/${projectId}/invitations/${id}`, undefined, "DELETE"),
    onSuccess: refresh,
    onError: (error) => toast.error(error.message),
  });
  return (
    <div className="space-y-3" data-testid="project-invitations">
      <form
        className="flex flex-wrap items-end gap-2"
        onSubmit={(e) => {
          e.preventDefault();
          invite.mutate();
        }}
      >
        <div className="grid gap-1">
          <Label htmlFor={`invite-email-${projectId}`}>Invite by email</Label>
          <Input id={`invite-email-${projectId}`} type="email" value={email} onChange={(e) => setEmail(e.target.value)} placeholder="ada@example.com" />
        </div>
        <div className="grid gap-1">
          <Label htmlFor={`invite-role-${projectId}`}>Role</Label>
          <select
            id={`invite-role-${projectId}`}
            className="border-input bg-background h-9 rounded-md border px-2 text-sm"
            value={role}
            onChange={(e) => setRole(e.target.value)}
          >
            <option value="viewer">viewer</option>
            <option value="approver">approver</option>
            <option value="owner">owner</option>
          </select>
        </div>
        <Button type="submit" size="sm" disabled={invite.isPending || !email.trim()} data-testid="invite-submit">
          Invite
        </Button>
      </form>
      {invite.error && (
        <Alert variant="destructive">
          <AlertDescription>{invite.error.message}</AlertDescription>
        </Alert>
      )}
      {!!pending.data?.length && (
        <ul className="space-y-1 text-sm">
          {pending.data.map((inv) => (
            <li key={inv.id} data-testid="pending-invitation" className="flex items-center justify-between gap-2">
              <span>
                {inv.email} · {inv.role} · pending
              </span>
              <Button size="sm" variant="ghost" disabled={revoke.isPending} onClick={() => revoke.mutate(inv.id)}>
                Revoke
              </Button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
