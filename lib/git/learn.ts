import { readFileAt } from "./commit-files";
import { git } from "./run";

/*
 * What project memory's front matter learns from a repository at a ref (the base for a new run, the run's branch at
 * delivery, so what a run added is learned from it): the tech stack from package.json, lockfiles and other ecosystems'
 * manifests, and the patterns from the folders and scripts. Deterministic, no model: the same tree learns the same.
 */

export type Learned = { techStack: string[]; patterns: string[] };

/** Dependencies worth naming, by package name (checked in this order, so the stack reads framework first). */
const PACKAGES: Array<[string, string]> = [
  ["next", "Next.js"],
  ["react", "React"],
  ["vue", "Vue"],
  ["@sveltejs/kit", "SvelteKit"],
  ["svelte", "Svelte"],
  ["@angular/core", "Angular"],
  ["express", "Express"],
  ["fastify", "Fastify"],
  ["hono", "Hono"],
  ["@nestjs/core", "NestJS"],
  ["typescript", "TypeScript"],
  ["tailwindcss", "Tailwind CSS"],
  ["drizzle-orm", "Drizzle ORM"],
  ["@prisma/client", "Prisma"],
  ["prisma", "Prisma"],
  ["@libsql/client", "libSQL"],
  ["pg", "PostgreSQL"],
  ["mongoose", "MongoDB (Mongoose)"],
  ["zod", "Zod"],
  ["next-auth", "Auth.js"],
  ["inngest", "Inngest"],
  ["ai", "AI SDK"],
  ["vitest", "Vitest"],
  ["jest", "Jest"],
  ["mocha", "Mocha"],
  ["@playwright/test", "Playwright"],
  ["cypress", "Cypress"],
  ["eslint", "ESLint"],
  ["@biomejs/biome", "Biome"],
];

/** Manifests of other ecosystems (and tools) at the repository's root. */
const MANIFESTS: Array<[RegExp, string]> = [
  [/^(pyproject\.toml|requirements\.txt|setup\.py|Pipfile)$/, "Python"],
  [/^go\.mod$/, "Go"],
  [/^Cargo\.toml$/, "Rust"],
  [/^Gemfile$/, "Ruby"],
  [/^(pom\.xml|build\.gradle(\.kts)?)$/, "Java"],
  [/^composer\.json$/, "PHP"],
  [/^(Dockerfile|compose\.ya?ml|docker-compose\.ya?ml)$/, "Docker"],
];

const LOCKFILES: Array<[string, string]> = [
  ["pnpm-lock.yaml", "pnpm"],
  ["yarn.lock", "Yarn"],
  ["bun.lockb", "Bun"],
  ["bun.lock", "Bun"],
  ["package-lock.json", "npm"],
];

/** Folder conventions, checked at the root (and under src/ for app/pages). */
const FOLDERS: Array<[string, string]> = [
  ["components", "UI components in components/"],
  ["lib", "Shared code in lib/"],
  ["src", "Source code in src/"],
  ["tests", "Tests in tests/"],
  ["test", "Tests in test/"],
  ["__tests__", "Tests in __tests__/"],
  ["e2e", "End-to-end tests in e2e/"],
  ["drizzle", "Database migrations in drizzle/ (drizzle-kit)"],
  ["migrations", "Database migrations in migrations/"],
  ["scripts", "Scripts in scripts/"],
  ["docs", "Documentation in docs/"],
];

const MAX_TREE_ENTRIES = 20_000;

export async function learnFromRepository({ repoPath, ref }: { repoPath: string; ref: string }): Promise<Learned> {
  const tree = await git(repoPath, ["ls-tree", "-r", "--name-only", ref], { allowFailure: true });
  if (tree.code !== 0) return { techStack: [], patterns: [] };
  const files = tree.stdout.split("\n").filter(Boolean).slice(0, MAX_TREE_ENTRIES);
  const top = new Set(files.map((f) => f.split("/")[0]!));
  const dirs = new Set(files.filter((f) => f.includes("/")).map((f) => f.split("/")[0]!));
  const techStack: string[] = [];
  const patterns: string[] = [];
  const add = (list: string[], item: string) => {
    if (!list.includes(item)) list.push(item);
  };

  let pkg: { dependencies?: Record<string, string>; devDependencies?: Record<string, string>; scripts?: Record<string, string>; packageManager?: string } | null = null;
  if (top.has("package.json")) {
    try {
      pkg = JSON.parse((await readFileAt({ repoPath, ref, path: "package.json" })) ?? "null");
    } catch {
      pkg = null;
    }
  }
  const deps = { ...(pkg?.dependencies ?? {}), ...(pkg?.devDependencies ?? {}) };
  if (pkg) add(techStack, "Node.js");
  for (const [name, label] of PACKAGES) if (name in deps) add(techStack, label);
  if (top.has("tsconfig.json")) add(techStack, "TypeScript");
  for (const [pattern, label] of MANIFESTS) if ([...top].some((f) => pattern.test(f))) add(techStack, label);

  const manager = pkg?.packageManager?.split("@")[0] || LOCKFILES.find(([file]) => top.has(file))?.[1];
  if (manager) add(techStack, manager === "yarn" ? "Yarn" : manager === "bun" ? "Bun" : manager);
  const run = manager === "Yarn" || manager === "yarn" ? "yarn" : manager === "pnpm" ? "pnpm" : manager === "Bun" || manager === "bun" ? "bun run" : "npm run";

  const inSrc = (d: string) => dirs.has(d) || files.some((f) => f.startsWith(`src/${d}/`));
  if ("next" in deps && inSrc("app")) add(patterns, "Next.js App Router: pages and route handlers in app/");
  if ("next" in deps && inSrc("pages")) add(patterns, "Next.js pages router in pages/");
  for (const [dir, pattern] of FOLDERS) if (dirs.has(dir)) add(patterns, pattern);
  const colocated = files.find((f) => /\.(test|spec)\.[cm]?[jt]sx?$/.test(f) && !/^(tests?|__tests__|e2e)\//.test(f));
  if (colocated) add(patterns, `Unit tests beside the code (*${colocated.slice(colocated.search(/\.(test|spec)\./))})`);
  if (files.some((f) => f.startsWith(".github/workflows/"))) add(patterns, "CI on GitHub Actions (.github/workflows/)");
  for (const script of ["test", "lint", "typecheck", "build"]) {
    if (pkg?.scripts?.[script]) add(patterns, `${script[0]!.toUpperCase()}${script.slice(1)} with \`${script === "test" && run === "npm run" ? "npm test" : `${run} ${script}`}\``);
  }
  return { techStack, patterns };
}
