import fs from "node:fs";
import os from "node:os";
import path from "node:path";

// Every test file gets its own data directory and database unless it sets one itself.
if (!process.env.GATEHOUSE_TEST_KEEP_ENV) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gatehouse-test-"));
  process.env.GATEHOUSE_DATA_DIR = dir;
  process.env.DATABASE_URL = `file:${path.join(dir, "test.db")}`;
  (process.env as Record<string, string>).NODE_ENV = "test";
  process.env.GATEHOUSE_ADMIN_TOKEN ??= "test-admin-token-0123456789";
  // The notification tests' webhook and SMTP receivers listen on 127.0.0.1 (address-policy.test.ts checks deny).
  process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES ??= "allow";
}
