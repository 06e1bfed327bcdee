import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** Point the app at a fresh data directory and database for one benchmark module. */
export function useTempDatabase(name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `gatehouse-bench-${name}-`));
  process.env.GATEHOUSE_DATA_DIR = dir;
  process.env.DATABASE_URL = `file:${path.join(dir, "bench.db")}`;
  process.env.LOG_LEVEL = "error";
  return dir;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export function printTable(rows: Array<Record<string, string | number>>) {
  console.table(rows);
}

export const fmt = (n: number, digits = 2) => Number.isFinite(n) ? Number(n.toFixed(digits)) : n;
