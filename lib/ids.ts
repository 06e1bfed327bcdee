import { monotonicFactory } from "ulid";

const ulid = monotonicFactory();

/** Time-sortable, URL-safe ids: `run_01JD…`. Lower-case so they read well in branch names. */
export function newId(prefix: "run" | "evt" | "prj" | "gate" | "clr" | "art" | "mc" | "tok" | "usr" | "inv"): string {
  return `${prefix}_${ulid().toLowerCase()}`;
}

/** A short slug from free text, for branch and file names. */
export function slugify(text: string, maxLength = 40): string {
  const slug = text
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, maxLength)
    .replace(/-+$/g, "");
  return slug || "request";
}
