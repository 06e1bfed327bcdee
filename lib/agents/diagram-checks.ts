import path from "node:path";
import type { MermaidConstraints } from "@/lib/mermaid";
import type { Sandbox } from "@/lib/sandbox/types";

/*
 * The plan's diagram as a contract, checked by code (not only told to the reviewer as prose): every route the diagram
 * names has a page or a handler, every component it names is defined, every data entity is in the schema. What counts:
 * - a route is a node whose text names a URL path (`/login`, `GET /api/users/:id`); a plain-language box ("Write the
 *   note") is left to the review. It exists as a file-system route (Next.js app/ or pages/, dynamic segments matching
 *   `:id`, `{id}`, `[id]`) or as the path quoted in source code (`router.get("/login", …)`).
 * - a component (database/subroutine/… shapes, subgraph titles, classes) is defined when a file or folder has its name,
 *   or source code declares it (`class`, `function`, `const`, `interface`, `type`, `def` … in Pascal, camel or snake case).
 * - an entity is in the schema when a schema-like file (schema, models, migrations, entities, `.sql`, `.prisma`) names it,
 *   singular or plural, in snake, Pascal or flat case.
 * The demo planner's "Answer: …" and "Feedback: …" boxes record what a person said; they are never taken as routes.
 */

export type DiagramCheck = { kind: "diagram"; passed: boolean; detail: string };

const SOURCE_EXTENSIONS = new Set([
  ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".py", ".rb", ".go", ".rs", ".java", ".kt", ".php", ".cs", ".swift",
  ".vue", ".svelte", ".astro", ".sql", ".prisma", ".graphql", ".gql", ".ex", ".exs", ".scala", ".dart", ".c", ".h", ".cpp",
]);
/** Bounds: a huge repository is sampled, not read whole, inside a validation step. */
const MAX_FILES_READ = 3_000;
const MAX_FILE_BYTES = 256 * 1024;
const NOTE_NODE = /^(answer|feedback)\s*:/i;
const ROUTE_TOKEN = /(?:^|[\s(])(?:(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+)?(\/[A-Za-z0-9_\-:{}[\].*/]*)/;
const IGNORED_DIRS = /(^|\/)(node_modules|\.git|\.autonomous|dist|build|\.next|vendor|coverage)(\/|$)/;

/** The URL path a route node names, or null for a plain-language box. */
export function routePathOf(node: string): string | null {
  if (NOTE_NODE.test(node.trim())) return null;
  const match = ROUTE_TOKEN.exec(node);
  if (!match) return null;
  const route = match[1]!.replace(/[.,;:)]+$/, "");
  // `/docs/readme.md` is a file, not a route.
  if (/\.[a-z0-9]{1,5}$/i.test(route) && !route.endsWith("/")) return null;
  return route.length > 1 ? route.replace(/\/+$/, "") : "/";
}

const isParam = (segment: string) => /^(:.+|\{.+\}|\[.+\]|\*)$/.test(segment);

/** The URL segments a Next.js app/ or pages/ file serves, or null for a file that serves none. */
function fileRoute(file: string): string[] | null {
  const parts = file.split("/");
  const base = parts.at(-1)!.replace(/\.[^.]+$/, "");
  const rootAt = parts.findIndex((p, i) => (p === "app" || p === "pages") && (i === 0 || (i === 1 && parts[0] === "src")));
  if (rootAt < 0) return null;
  const dirs = parts.slice(rootAt + 1, -1).filter((p) => !/^\(.*\)$/.test(p) && !p.startsWith("@"));
  if (parts[rootAt] === "app") return base === "page" || base === "route" ? dirs : null;
  if (base.startsWith("_")) return null;
  return base === "index" ? dirs : [...dirs, base];
}

function routeMatches(route: string, served: string[]): boolean {
  const wanted = route.split("/").filter(Boolean);
  if (served.some((s) => s.startsWith("[..."))) return wanted.length >= served.length - 1;
  if (wanted.length !== served.length) return false;
  return wanted.every((w, i) => w === served[i] || (isParam(w) && isParam(served[i]!)));
}

const words = (name: string) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w.toLowerCase());
const flat = (name: string) => words(name).join("");
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function nameForms(name: string): string[] {
  const w = words(name);
  if (!w.length) return [];
  const pascal = w.map((x) => x[0]!.toUpperCase() + x.slice(1)).join("");
  return [...new Set([pascal, pascal[0]!.toLowerCase() + pascal.slice(1), w.join("_"), w.join("")])];
}

type Repository = { files: string[]; dirs: string[]; contents: Map<string, string> };

async function readRepository(sandbox: Pick<Sandbox, "listFiles" | "readFile">): Promise<Repository> {
  const entries = await sandbox.listFiles(".", { recursive: true }).catch(() => []);
  const usable = entries.filter((e) => !IGNORED_DIRS.test(e.path));
  const files = usable.filter((e) => e.type === "file");
  const contents = new Map<string, string>();
  for (const f of files) {
    if (contents.size >= MAX_FILES_READ) break;
    if (!SOURCE_EXTENSIONS.has(path.extname(f.path).toLowerCase()) || (f.size ?? 0) > MAX_FILE_BYTES) continue;
    const text = await sandbox.readFile(f.path).catch(() => null);
    if (text !== null) contents.set(f.path, text);
  }
  return { files: files.map((f) => f.path), dirs: usable.filter((e) => e.type === "dir").map((e) => e.path), contents };
}

function routeExists(route: string, repo: Repository): boolean {
  if (repo.files.some((f) => SOURCE_EXTENSIONS.has(path.extname(f)) && routeMatches(route, fileRoute(f) ?? ["\0"]))) return true;
  const quoted = new RegExp(`[\`'"]${escape(route)}/?[\`'"?]`);
  return [...repo.contents.values()].some((text) => quoted.test(text));
}

function componentDefined(name: string, repo: Repository): boolean {
  const key = flat(name);
  if (!key) return true;
  const baseFlat = (p: string) => flat(path.basename(p).replace(/\.[^.]+$/, ""));
  if ([...repo.files, ...repo.dirs].some((p) => baseFlat(p) === key)) return true;
  const forms = nameForms(name).map(escape).join("|");
  const declared = new RegExp(`\\b(class|function|interface|type|const|let|var|def|struct|enum|trait|object|module|fn|func)\\s+(${forms})\\b`);
  return [...repo.contents.values()].some((text) => declared.test(text));
}

const SCHEMA_FILE = /(schema|model|migration|entit|(^|\/)db\/)|\.(sql|prisma)$/i;

function entityInSchema(name: string, repo: Repository): boolean {
  const forms = nameForms(name).map(escape);
  if (!forms.length) return true;
  const named = new RegExp(`\\b(${forms.join("|")})(s|es)?\\b`, "i");
  return [...repo.contents.entries()].some(([file, text]) => SCHEMA_FILE.test(file) && named.test(text));
}

/** The diagram's routes, components and entities against the repository as the implementation left it. */
export async function checkDiagramConstraints({
  constraints,
  sandbox,
}: {
  constraints: MermaidConstraints | undefined;
  sandbox: Pick<Sandbox, "listFiles" | "readFile">;
}): Promise<DiagramCheck | null> {
  if (!constraints) return null;
  const routes = constraints.requiredRoutes
    .map((node) => ({ node, route: routePathOf(node) }))
    .filter((r): r is { node: string; route: string } => r.route !== null);
  const components = constraints.requiredComponents.filter((c) => !NOTE_NODE.test(c.trim()));
  const entities = constraints.dataEntities.map((e) => e.name);
  if (!routes.length && !components.length && !entities.length) return null;
  const repo = await readRepository(sandbox);
  const missing = [
    ...routes.filter((r) => !routeExists(r.route, repo)).map((r) => `route "${r.node}" has no page or handler for ${r.route}`),
    ...components.filter((c) => !componentDefined(c, repo)).map((c) => `component "${c}" is never defined`),
    ...entities.filter((e) => !entityInSchema(e, repo)).map((e) => `entity "${e}" is missing from the schema`),
  ];
  const counted = `${routes.length} route(s), ${components.length} component(s), ${entities.length} entit${entities.length === 1 ? "y" : "ies"}`;
  return missing.length
    ? { kind: "diagram", passed: false, detail: `The plan's diagram is not met: ${missing.join("; ")}.` }
    : { kind: "diagram", passed: true, detail: `Everything the plan's diagram names exists (${counted}).` };
}
