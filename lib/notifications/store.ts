import { and, desc, eq, isNull } from "drizzle-orm";
import { z } from "zod";
import { getDb, write } from "@/lib/db";
import { notificationChannels, notificationDeliveries, type NoticeLevel, type NotificationKind } from "@/lib/db/schema";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { AppError, describeIssues } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { encryptSecret } from "./crypto";
import { NOTIFICATION_KINDS, PERSONAL_KINDS, personalConfigSchemas, projectConfigSchemas, SECRET_RULES, type PersonalKind } from "./channels";

/*
 * Channel configuration: a project's channels (its owners configure them) and each person's own (themselves only).
 * A secret goes in encrypted and never comes out: views say only whether one is set.
 */

export type ChannelRow = typeof notificationChannels.$inferSelect;
export type DeliveryRow = typeof notificationDeliveries.$inferSelect;

/** A channel as the API shows it: its config, and "set" in place of its secret. */
export type ChannelView = {
  id: string;
  kind: NotificationKind;
  enabled: boolean;
  config: Record<string, unknown>;
  secret: "set" | null;
  /** What it receives: decisions only, decisions and run ends, or everything (run pauses too). */
  notices: NoticeLevel;
  updatedAt: string;
};

export function toView(row: ChannelRow): ChannelView {
  return { id: row.id, kind: row.kind, enabled: row.enabled, config: row.config, secret: row.secret ? "set" : null, notices: row.notices, updatedAt: row.updatedAt.toISOString() };
}

const noticesSchema = z.enum(["decisions", "run_ends", "everything"], { error: 'notices: must be "decisions", "run_ends" or "everything"' });

export const kindSchema = z.enum(NOTIFICATION_KINDS, { error: `must be one of ${NOTIFICATION_KINDS.join(", ")}` });
export const personalKindSchema = z.enum(PERSONAL_KINDS, { error: `must be one of ${PERSONAL_KINDS.join(", ")} (the channels that are personal)` });

/** PUT body of a channel; `config` is checked against its kind below, `secret` omitted keeps the stored one. */
export const saveChannelSchema = z.strictObject({
  enabled: z.boolean().default(true),
  config: z.record(z.string(), z.unknown(), { error: "config: must be an object" }),
  secret: z.string().max(2_000, "secret: at most 2000 characters").optional(),
  /** Omitted: kept as saved (a new channel gets "decisions"). */
  notices: noticesSchema.optional(),
});

export const savePersonalSchema = z.strictObject({
  enabled: z.boolean().default(true),
  config: z.record(z.string(), z.unknown(), { error: "config: must be an object" }),
  notices: noticesSchema.optional(),
});

function parseWithPrefix<S extends z.ZodType>(schema: S, value: unknown, prefix: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AppError("bad_request:notification", describeIssues(parsed.error.issues.map((i) => ({ ...i, path: [prefix, ...i.path] }))));
  }
  return parsed.data;
}

export function parseKind(value: string): NotificationKind {
  return parseWithPrefix(kindSchema, value, "kind");
}

export function parsePersonalKind(value: string): PersonalKind {
  return parseWithPrefix(personalKindSchema, value, "channel");
}

// ---------------------------------------------------------------------------------------------------------------------
// Project channels (owners)

export async function listProjectChannels({ user, projectId }: { user: SessionUser; projectId: string }): Promise<ChannelView[]> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const db = await getDb();
  const rows = await db.select().from(notificationChannels).where(eq(notificationChannels.projectId, projectId));
  return rows.map(toView);
}

export async function saveProjectChannel({
  user,
  projectId,
  kind,
  input,
}: {
  user: SessionUser;
  projectId: string;
  kind: NotificationKind;
  input: z.output<typeof saveChannelSchema>;
}): Promise<ChannelView> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const config = parseWithPrefix(projectConfigSchemas[kind], input.config, "config") as Record<string, unknown>;
  const rule = SECRET_RULES[kind];
  const secret = input.secret === undefined || input.secret === "" ? undefined : parseWithPrefix(rule.schema, input.secret, "secret");
  return write(async (tx) => {
    const existing = await tx.query.notificationChannels.findFirst({
      where: and(eq(notificationChannels.projectId, projectId), eq(notificationChannels.kind, kind)),
    });
    if (!existing?.secret && secret === undefined && rule.required) {
      throw new AppError("bad_request:notification", `secret: required for a ${kind} channel: ${rule.what}.`);
    }
    if (kind === "email" && (config as { username?: string }).username && secret === undefined && !existing?.secret) {
      throw new AppError("bad_request:notification", "secret: config.username is set, so the SMTP password is required.");
    }
    const values = {
      enabled: input.enabled,
      config,
      ...(secret !== undefined ? { secret: encryptSecret(secret) } : {}),
      ...(input.notices ? { notices: input.notices } : {}),
      updatedAt: new Date(),
    };
    if (existing) {
      const [row] = await tx.update(notificationChannels).set(values).where(eq(notificationChannels.id, existing.id)).returning();
      return toView(row!);
    }
    const [row] = await tx
      .insert(notificationChannels)
      .values({ id: newId("nch"), projectId, kind, secret: null, ...values })
      .returning();
    return toView(row!);
  });
}

export async function deleteProjectChannel({ user, projectId, kind }: { user: SessionUser; projectId: string; kind: NotificationKind }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  const deleted = await write((tx) =>
    tx
      .delete(notificationChannels)
      .where(and(eq(notificationChannels.projectId, projectId), eq(notificationChannels.kind, kind)))
      .returning({ id: notificationChannels.id }),
  );
  return { deleted: deleted.length > 0 };
}

export async function findProjectChannel({ projectId, kind }: { projectId: string; kind: NotificationKind }): Promise<ChannelRow | null> {
  const db = await getDb();
  return (
    (await db.query.notificationChannels.findFirst({ where: and(eq(notificationChannels.projectId, projectId), eq(notificationChannels.kind, kind)) })) ??
    null
  );
}

// ---------------------------------------------------------------------------------------------------------------------
// Personal channels (each person, their own)

export async function listPersonalChannels({ user }: { user: SessionUser }): Promise<ChannelView[]> {
  const db = await getDb();
  const rows = await db.select().from(notificationChannels).where(and(eq(notificationChannels.userId, user.id), isNull(notificationChannels.projectId)));
  return rows.map(toView);
}

export async function savePersonalChannel({
  user,
  kind,
  input,
}: {
  user: SessionUser;
  kind: PersonalKind;
  input: z.output<typeof savePersonalSchema>;
}): Promise<ChannelView> {
  const config = parseWithPrefix(personalConfigSchemas[kind], input.config, "config") as Record<string, unknown>;
  return write(async (tx) => {
    const existing = await tx.query.notificationChannels.findFirst({
      where: and(eq(notificationChannels.userId, user.id), eq(notificationChannels.kind, kind)),
    });
    const values = { enabled: input.enabled, config, ...(input.notices ? { notices: input.notices } : {}), updatedAt: new Date() };
    if (existing) {
      const [row] = await tx.update(notificationChannels).set(values).where(eq(notificationChannels.id, existing.id)).returning();
      return toView(row!);
    }
    const [row] = await tx.insert(notificationChannels).values({ id: newId("nch"), userId: user.id, kind, ...values }).returning();
    return toView(row!);
  });
}

export async function deletePersonalChannel({ user, kind }: { user: SessionUser; kind: PersonalKind }) {
  const deleted = await write((tx) =>
    tx
      .delete(notificationChannels)
      .where(and(eq(notificationChannels.userId, user.id), eq(notificationChannels.kind, kind)))
      .returning({ id: notificationChannels.id }),
  );
  return { deleted: deleted.length > 0 };
}

// ---------------------------------------------------------------------------------------------------------------------
// Delivery log (owners)

export type DeliveryView = Omit<DeliveryRow, "message" | "createdAt" | "updatedAt" | "deliveredAt"> & {
  title: string;
  url: string;
  createdAt: string;
  updatedAt: string;
  deliveredAt: string | null;
};

export function toDeliveryView(row: DeliveryRow): DeliveryView {
  const { message, createdAt, updatedAt, deliveredAt, ...rest } = row;
  return {
    ...rest,
    title: String(message.title ?? ""),
    url: String(message.url ?? ""),
    createdAt: createdAt.toISOString(),
    updatedAt: updatedAt.toISOString(),
    deliveredAt: deliveredAt ? deliveredAt.toISOString() : null,
  };
}

export const deliveriesQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1, "limit: at least 1").max(200, "limit: at most 200").default(50),
  runId: z.string().max(100).optional(),
});

export async function listDeliveries({
  user,
  projectId,
  limit,
  runId,
}: {
  user: SessionUser;
  projectId: string;
  limit: number;
  runId?: string;
}): Promise<DeliveryView[]> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const db = await getDb();
  const rows = await db
    .select()
    .from(notificationDeliveries)
    .where(and(eq(notificationDeliveries.projectId, projectId), runId ? eq(notificationDeliveries.workflowRunId, runId) : undefined))
    .orderBy(desc(notificationDeliveries.createdAt), desc(notificationDeliveries.id))
    .limit(limit);
  return rows.map(toDeliveryView);
}
