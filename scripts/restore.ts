import { restoreBackup } from "@/lib/ops/backup";

/** `npm run restore -- <backup directory> [--force]`: verify a backup, then put it in the data directory (app stopped). */
const args = process.argv.slice(2);
const force = args.includes("--force");
const from = args.find((a) => !a.startsWith("--"));
if (!from) {
  console.error("Usage: npm run restore -- <backup directory> [--force]   (stop the app first)");
  process.exit(2);
}
try {
  const { replaced, files } = await restoreBackup({ from, force });
  for (const f of files) console.log(`restored ${f}`);
  if (replaced) console.log(`the database it replaced is kept as ${replaced}`);
  console.log("Start the app: pending migrations are applied at start.");
} catch (error) {
  console.error(`Restore failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
