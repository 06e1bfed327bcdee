#!/usr/bin/env node
// Launcher for `npx gatehouse` in a checkout of this repository: runs the TypeScript CLI (cli/gatehouse.ts) through
// tsx, a devDependency, so it needs `npm install` with dev dependencies (the default).
import { register } from "tsx/esm/api";

register();
const { main } = await import("../cli/gatehouse.ts");
const code = await main({ argv: process.argv.slice(2) });
// The reader of our output went away (`gatehouse watch … | head`): stop now, though a stream may still be open.
if (process.stdout.destroyed || process.stderr.destroyed) process.exit(code);
process.exitCode = code;
