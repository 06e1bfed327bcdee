import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { CLI, CliError, EXIT } from "./errors";

/*
 * The CLI is a separate program from the server: this module is the one place it reads its environment
 * (GATEHOUSE_URL, GATEHOUSE_TOKEN, XDG_CONFIG_HOME, HOME, VISUAL/EDITOR) and its config file.
 */

export type CliEnv = Record<string, string | undefined>;

/** The process environment, read here and nowhere else in cli/. */
export function processEnv(): CliEnv {
  return process.env;
}

const storedSchema = z.object({
  url: z.string().url(),
  token: z.string().min(1),
});

export type Credentials = z.output<typeof storedSchema>;

/** `$XDG_CONFIG_HOME/gatehouse/config.json`, or `~/.config/gatehouse/config.json`. */
export function configPath({ env }: { env: CliEnv }): string {
  const base = env.XDG_CONFIG_HOME?.trim() || path.join(env.HOME?.trim() || os.homedir(), ".config");
  return path.join(base, "gatehouse", "config.json");
}

function readStored({ env }: { env: CliEnv }): Partial<Credentials> {
  const file = configPath({ env });
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    return {};
  }
  try {
    const parsed = storedSchema.partial().safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data;
  } catch {
    // fall through: a broken file is reported below
  }
  throw new CliError(EXIT.usage, `${file} is not a valid Gatehouse config; run \`${CLI} login\` again.`);
}

/** Server URL and token: GATEHOUSE_URL / GATEHOUSE_TOKEN win over the stored login. */
export function resolveCredentials({ env }: { env: CliEnv }): Credentials {
  const stored = readStored({ env });
  const url = env.GATEHOUSE_URL?.trim() || stored.url;
  const token = env.GATEHOUSE_TOKEN?.trim() || stored.token;
  if (!url || !token) {
    throw new CliError(
      EXIT.auth,
      `Not logged in: run \`${CLI} login --url <server> --token <api token>\` (or set GATEHOUSE_URL and GATEHOUSE_TOKEN).`,
    );
  }
  return { url: normalizeUrl(url), token };
}

export function normalizeUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(EXIT.usage, `"${url}" is not a URL; give the server's address, e.g. http://127.0.0.1:3000.`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new CliError(EXIT.usage, `"${url}" must start with http:// or https://.`);
  }
  return parsed.origin + parsed.pathname.replace(/\/+$/, "");
}

/** Store the login readable by the user only: the directory 0700, the file 0600 (also when it already existed). */
export function saveCredentials({ env, credentials }: { env: CliEnv; credentials: Credentials }): string {
  const file = configPath({ env });
  const dir = path.dirname(file);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
  return file;
}

/** The editor for `gatehouse edit`: $VISUAL, then $EDITOR, then vi. */
export function editorCommand({ env }: { env: CliEnv }): string {
  return env.VISUAL?.trim() || env.EDITOR?.trim() || "vi";
}
