import { defineConfig } from "drizzle-kit";

// Generation only needs the schema; `npm run db:migrate` (scripts/migrate.ts) applies migrations with the app's own client.
export default defineConfig({
  dialect: "sqlite",
  schema: ["./lib/db/schema.ts", "./lib/executor/schema.ts"],
  out: "./drizzle",
});
