/**
 * Git pathspecs that leave the given paths out of `git add`/`git status`. Used by the sandbox (what a listing hides)
 * and by checkpoints (what is never staged), so it lives in git, below the sandbox.
 */
export function excludePathspecs(excludePaths: string[] = []): string[] {
  // Like .gitignore: a pattern without a slash, or with only a trailing one ("node_modules/"), matches at any depth
  // ("*.log", "secrets", "node_modules/").
  return excludePaths
    .map((p) => p.trim().replace(/^\/+/, ""))
    .filter((p) => p !== "")
    .flatMap((p) => (p.replace(/\/+$/, "").includes("/") ? [`:(exclude,glob)${p}`] : [`:(exclude,glob)${p}`, `:(exclude,glob)**/${p}`]));
}
