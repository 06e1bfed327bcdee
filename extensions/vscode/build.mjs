// Builds the extension into dist/: the host (Node, CommonJS, `vscode` external) and the run panel's webview (browser
// bundle of the dashboard's components, webview.css for the CSS they import, theme.css for their Tailwind classes). It resolves React, mermaid, zod and the
// dashboard's sources from the repository around it: the extension is built inside the Gatehouse repository.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import postcss from "postcss";
import tailwind from "@tailwindcss/postcss";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "dist");
const production = process.argv.includes("--production");

export async function build({ only } = {}) {
  fs.mkdirSync(dist, { recursive: true });
  const common = { bundle: true, logLevel: "warning", minify: production, sourcemap: !production, tsconfig: path.join(here, "tsconfig.json") };
  const jobs = [];
  if (!only || only === "host") {
    jobs.push(
      esbuild.build({
        ...common,
        entryPoints: [path.join(here, "src/host/extension.ts")],
        outfile: path.join(dist, "extension.js"),
        platform: "node",
        format: "cjs",
        target: "node20",
        external: ["vscode"],
      }),
    );
  }
  if (!only || only === "webview") {
    jobs.push(
      esbuild.build({
        ...common,
        entryPoints: [path.join(here, "src/webview/main.tsx")],
        outfile: path.join(dist, "webview.js"),
        platform: "browser",
        format: "iife",
        target: "es2022",
        jsx: "automatic",
        define: { "process.env.NODE_ENV": JSON.stringify(production ? "production" : "development") },
        // The "use client" markers of the dashboard's components mean nothing outside Next.js.
        logOverride: { "module-level-directive": "silent" },
      }),
    );
    const input = path.join(here, "src/webview/webview.css");
    jobs.push(
      postcss([tailwind({ base: path.resolve(here, "../..") })])
        .process(fs.readFileSync(input, "utf8"), { from: input, to: path.join(dist, "theme.css") })
        .then((result) => fs.writeFileSync(path.join(dist, "theme.css"), result.css)),
    );
  }
  await Promise.all(jobs);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  await build();
  console.log(`built dist/ in ${((Date.now() - started) / 1000).toFixed(1)}s`);
}
