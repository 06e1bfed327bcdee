import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { getEnv } from "@/lib/env";

/**
 * AUTH_SECRET, or — on a single-machine install without one — a random secret generated once and kept (mode 0600) in
 * the data directory, so sessions survive restarts without any set-up.
 */
export function getAuthSecret(): string {
  const env = getEnv();
  if (env.AUTH_SECRET) return env.AUTH_SECRET;
  return dataDirSecret({ name: "auth-secret", encoding: "base64url" });
}

/**
 * A secret kept in a file of the data directory: read when it holds one (32 characters or more), otherwise 32 random
 * bytes written once (mode 0600). Processes starting together agree: the one whose exclusive create loses reads the
 * winner's.
 */
export function dataDirSecret({ name, encoding }: { name: string; encoding: "base64url" | "hex" }): string {
  const env = getEnv();
  const file = path.join(env.dataDir, name);
  try {
    const existing = fs.readFileSync(file, "utf8").trim();
    if (existing.length >= 32) return existing;
  } catch {
    // not created yet
  }
  fs.mkdirSync(env.dataDir, { recursive: true });
  const secret = crypto.randomBytes(32).toString(encoding);
  try {
    fs.writeFileSync(file, secret, { mode: 0o600, flag: "wx" });
    return secret;
  } catch {
    // another process created it first: use theirs
    return fs.readFileSync(file, "utf8").trim();
  }
}

export function sha256(value: string): string {
  return crypto.createHash("sha256").update(value).digest("hex");
}

export function safeEqual(a: string, b: string): boolean {
  const ha = crypto.createHash("sha256").update(a).digest();
  const hb = crypto.createHash("sha256").update(b).digest();
  return crypto.timingSafeEqual(ha, hb);
}
