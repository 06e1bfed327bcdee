import { z } from "zod";
import { RUN_STATUSES, type RunStatus } from "@/lib/workflow";

export const createRunSchema = z.strictObject({
  projectId: z.string().trim().min(1, "is required").max(100),
  request: z
    .string({ error: "is required and must be text" })
    .trim()
    .min(1, "must not be empty")
    .max(50_000, "must be at most 50000 characters"),
  config: z.record(z.string(), z.unknown()).optional(),
  /** Start the request this many times side by side under one group id (GET /api/run-groups/:id). */
  approaches: z.number({ error: "must be a whole number from 1 to 5" }).int("must be a whole number from 1 to 5").min(1, "must be at least 1").max(5, "must be at most 5").optional(),
  /** With `approaches`: a note per approach ("try a regex", …), appended to that approach's request; empty = none. */
  approachNotes: z.array(z.string().trim().max(500, "must be at most 500 characters each"), { error: "must be a list of texts" }).max(5).optional(),
}).superRefine((body, ctx) => {
  if (body.approachNotes === undefined) return;
  if (body.approaches === undefined) ctx.addIssue({ code: "custom", path: ["approachNotes"], message: "needs approaches (how many runs to start)" });
  else if (body.approachNotes.length > body.approaches) ctx.addIssue({ code: "custom", path: ["approachNotes"], message: `has ${body.approachNotes.length} notes for ${body.approaches} approaches` });
});

const statusSchema = z.enum(RUN_STATUSES as [RunStatus, ...RunStatus[]]);

export const listRunsQuerySchema = z.strictObject({
  status: z
    .string()
    .optional()
    .transform((v) => (v ? v.split(",").filter(Boolean) : undefined))
    .pipe(z.array(statusSchema, { error: `must be a comma-separated list of: ${RUN_STATUSES.join(", ")}` }).optional()),
  projectId: z.string().max(100).optional(),
  cursor: z.string().max(200).optional(),
  q: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});

export const listEventsQuerySchema = z.strictObject({
  after: z.coerce.number({ error: "must be a sequence number" }).int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(2000).default(500),
});
