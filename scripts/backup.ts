import { closeDb } from "@/lib/db";
import { createBackup } from "@/lib/ops/backup";

/** `npm run backup -- [directory]` (default ./backups): an online copy of the database and the data directory's secrets. */
const into = process.argv[2] ?? "backups";
try {
  const { dir, manifest } = await createBackup({ into });
  console.log(`Backup written to ${dir}`);
  for (const f of manifest.files) console.log(`  ${f.name}  ${f.bytes} bytes  sha256 ${f.sha256.slice(0, 16)}…`);
  console.log(`Restore it with: npm run restore -- ${dir} (with the app stopped)`);
} catch (error) {
  console.error(`Backup failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
} finally {
  closeDb();
}
