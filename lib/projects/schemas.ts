import path from "node:path";
import { z } from "zod";

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

export const createProjectSchema = z.strictObject({
  name: z.string().trim().min(1, "must not be empty").max(200, "must be at most 200 characters"),
  repository: repositorySchema,
  defaultConfig: z.record(z.string(), z.unknown()).optional(),
});

export const updateProjectSchema = z.strictObject({
  name: z.string().trim().min(1, "must not be empty").max(200, "must be at most 200 characters").optional(),
  repository: repositorySchema.optional(),
  defaultConfig: z.record(z.string(), z.unknown()).optional(),
});
