import path from "node:path";
import { z } from "zod";
import { nameSchema } from "@/lib/plain-text";
import { redact } from "@/lib/redact";

export const repositorySchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({
      type: z.literal("local"),
      path: z
        .string()
        .trim()
        .min(1, "must not be empty")
        .max(4096)
        .refine((p) => path.isAbsolute(p), "must be an absolute path to a git repository on this machine"),
    }),
    z.strictObject({
      type: z.literal("github"),
      owner: z.string().trim().regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/, "must be a GitHub owner name"),
      repo: z.string().trim().regex(/^[A-Za-z0-9._-]{1,100}$/, "must be a GitHub repository name"),
      installationId: z.number().int().positive().optional(),
    }),
  ],
  { error: 'must be {"type":"local","path":…} or {"type":"github","owner":…,"repo":…}' },
);

/** A project's name: one line without control characters (issue #29.8), and free text, so a key pasted into it is redacted before it is stored (issue #29.7). */
export const projectNameSchema = nameSchema({ max: 200 }).transform((name) => redact(name));

export const createProjectSchema = z.strictObject({
  name: projectNameSchema,
  repository: repositorySchema,
  defaultConfig: z.record(z.string(), z.unknown()).optional(),
});

export const updateProjectSchema = z.strictObject({
  name: projectNameSchema.optional(),
  repository: repositorySchema.optional(),
  defaultConfig: z.record(z.string(), z.unknown()).optional(),
});
