import { closeDb } from "@/lib/db";
import { getEnv, loadEnvFiles } from "@/lib/env";
import { createLoginLink } from "@/lib/auth/login-link";
import { SIGN_IN_LINK_VALIDITY } from "@/lib/auth/sign-in-help";

/**
 * `npm run sign-in-link`: prints a fresh one-time sign-in link for the server's owner, while the server runs (no
 * restart). The token goes into the server's own database (hashed), so run it where the server runs, with its env.
 */
try {
  loadEnvFiles();
  const env = getEnv();
  const link = await createLoginLink({ publicUrl: env.publicUrl });
  const where = env.databaseUrl.startsWith("file:") ? env.databaseUrl.slice("file:".length) : "the configured DATABASE_URL";
  console.log(`One-time sign-in link for the owner of ${env.publicUrl} (${SIGN_IN_LINK_VALIDITY}; stored in ${where}):`);
  console.log(`    ${link}`);
} catch (error) {
  console.error(`Could not make a sign-in link: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
} finally {
  closeDb();
}
