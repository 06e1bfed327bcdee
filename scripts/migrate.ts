import { closeDb, getDb } from "@/lib/db";
import { getEnv } from "@/lib/env";

/** `npm run db:migrate`: apply pending migrations to DATABASE_URL (the app also does this itself at start). */
const env = getEnv();
await getDb();
closeDb();
console.log(`Migrations applied to ${env.databaseUrl.replace(/\/\/[^@]*@/, "//***@")}`);
