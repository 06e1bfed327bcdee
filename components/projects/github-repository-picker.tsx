"use client";

import { useQuery } from "@tanstack/react-query";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Badge } from "@/components/ui/badge";
import { Button } from "@/components/ui/button";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { RadioGroup, RadioGroupItem } from "@/components/ui/radio-group";
import { Skeleton } from "@/components/ui/skeleton";
import { apiGet } from "@/components/runs/api";

/*
 * "Connect a repository from the app's installations": the repositories the GitHub App is installed on (kept by the
 * installation webhooks) as one radio group, with owner/repository typed by hand as the fallback.
 */

export type InstallationRepository = { id: number; installationId: number; owner: string; repo: string; fullName: string; private: boolean };
type RepositoriesResponse = { configured: boolean; repositories: InstallationRepository[] };

/** What the create form holds for a GitHub binding; `manual` when owner/repo were typed rather than picked. */
export type GitHubPick = { owner: string; repo: string; installationId?: number; manual: boolean };
export const emptyGitHubPick: GitHubPick = { owner: "", repo: "", manual: false };

const MANUAL = "manual";

export function useInstallationRepositories({ enabled }: { enabled: boolean }) {
  return useQuery({
    queryKey: ["github", "repositories"],
    queryFn: () => apiGet<RepositoriesResponse>("/api/github/repositories"),
    enabled,
    staleTime: 10_000,
  });
}

/** Typed entry is used when chosen, and whenever there is no list to choose from (empty, failed, loading). */
export function isManualEntry({ pick, listed }: { pick: GitHubPick; listed: boolean }) {
  return pick.manual || !listed;
}

export function validateGitHubPick({ pick, listed }: { pick: GitHubPick; listed: boolean }): Record<string, string> {
  if (!isManualEntry({ pick, listed })) return pick.installationId ? {} : { github: "Choose a repository, or enter one by hand." };
  const found: Record<string, string> = {};
  if (!pick.owner.trim()) found.owner = "Enter the GitHub owner.";
  if (!pick.repo.trim()) found.repo = "Enter the repository name.";
  return found;
}

export function GitHubRepositoryPicker({
  value,
  onChange,
  errors,
}: {
  value: GitHubPick;
  onChange: (next: GitHubPick) => void;
  errors: Record<string, string>;
}) {
  const query = useInstallationRepositories({ enabled: true });
  const repositories = query.data?.repositories ?? [];
  const listed = repositories.length > 0;
  const manual = isManualEntry({ pick: value, listed });
  const selected = value.manual ? MANUAL : value.installationId ? `${value.owner}/${value.repo}` : "";

  const choose = (choice: string) => {
    if (choice === MANUAL) return onChange({ ...emptyGitHubPick, manual: true });
    const repo = repositories.find((r) => r.fullName === choice);
    if (repo) onChange({ owner: repo.owner, repo: repo.repo, installationId: repo.installationId, manual: false });
  };

  return (
    <div className="grid gap-3" data-testid="github-repository-picker">
      {query.data && !query.data.configured && (
        <Alert data-testid="github-not-configured">
          <AlertTitle>GitHub App not configured</AlertTitle>
          <AlertDescription>
            This server has no GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY, so runs cannot fetch, push or open pull requests yet. You can still bind the
            project now.
          </AlertDescription>
        </Alert>
      )}

      {query.isPending ? (
        <div className="grid gap-2" aria-busy="true" data-testid="github-repositories-loading">
          <span className="sr-only">Loading the GitHub App's repositories…</span>
          <Skeleton className="h-8 w-full" />
          <Skeleton className="h-8 w-full" />
        </div>
      ) : query.error ? (
        <div role="alert" className="flex items-start justify-between gap-2 text-sm" data-testid="github-repositories-error">
          <p className="text-destructive">Could not load the GitHub App&apos;s repositories: {query.error.message} Enter the repository by hand, or retry.</p>
          <Button type="button" size="sm" variant="outline" onClick={() => query.refetch()} disabled={query.isFetching}>
            Retry
          </Button>
        </div>
      ) : !listed ? (
        <p className="text-muted-foreground text-sm" data-testid="github-repositories-empty">
          No repositories yet. Install the GitHub App on a repository, then it appears here. Until then, enter the owner and repository by hand.
        </p>
      ) : (
        <fieldset className="grid gap-2">
          <legend id="github-repository-legend" className="mb-1 text-sm font-medium">
            Repositories the GitHub App is installed on
          </legend>
          <RadioGroup
            value={selected}
            onValueChange={choose}
            aria-labelledby="github-repository-legend"
            aria-invalid={!!errors.github}
            aria-describedby={errors.github ? "github-repository-error" : undefined}
            className="max-h-64 gap-1 overflow-y-auto rounded-md border p-1"
            data-testid="github-repositories"
          >
            {repositories.map((r) => (
              <Label key={r.id} htmlFor={`github-repo-${r.id}`} className="hover:bg-muted has-[[data-state=checked]]:bg-muted flex cursor-pointer items-center gap-2 rounded px-2 py-1.5 font-normal">
                <RadioGroupItem value={r.fullName} id={`github-repo-${r.id}`} />
                <span className="min-w-0 flex-1 truncate font-mono text-xs">{r.fullName}</span>
                {r.private && <Badge variant="outline">private</Badge>}
              </Label>
            ))}
            <Label htmlFor="github-repo-manual" className="hover:bg-muted has-[[data-state=checked]]:bg-muted flex cursor-pointer items-center gap-2 rounded px-2 py-1.5 font-normal">
              <RadioGroupItem value={MANUAL} id="github-repo-manual" />
              <span>Another repository (enter owner and name)</span>
            </Label>
          </RadioGroup>
          {errors.github && (
            <p id="github-repository-error" className="text-destructive text-xs">
              {errors.github}
            </p>
          )}
        </fieldset>
      )}

      {manual && !query.isPending && (
        <div className="grid grid-cols-2 gap-2">
          <div className="grid gap-2">
            <Label htmlFor="project-owner">Owner</Label>
            <Input id="project-owner" value={value.owner} onChange={(e) => onChange({ owner: e.target.value, repo: value.repo, manual: true })} aria-invalid={!!errors.owner} />
            {errors.owner && <p className="text-destructive text-xs">{errors.owner}</p>}
          </div>
          <div className="grid gap-2">
            <Label htmlFor="project-repo">Repository</Label>
            <Input id="project-repo" value={value.repo} onChange={(e) => onChange({ owner: value.owner, repo: e.target.value, manual: true })} aria-invalid={!!errors.repo} />
            {errors.repo && <p className="text-destructive text-xs">{errors.repo}</p>}
          </div>
        </div>
      )}
    </div>
  );
}
