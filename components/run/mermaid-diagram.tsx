"use client";

import { useEffect, useId, useRef, useState } from "react";
import { useTheme } from "next-themes";
import { RotateCcw } from "lucide-react";
import { Button } from "@/components/ui/button";
import { Skeleton } from "@/components/ui/skeleton";
import { latestRenderer, type LatestRenderer } from "./latest-renderer";

type MermaidApi = typeof import("mermaid").default;
let loading: Promise<MermaidApi> | null = null;

/** mermaid is large: load it only when a diagram is on screen. */
export function loadMermaid(): Promise<MermaidApi> {
  loading ??= import("mermaid").then((m) => m.default);
  return loading;
}

type State = { kind: "loading" } | { kind: "ok"; svg: string } | { kind: "error"; message: string };

type Wanted = { source: string; theme: "dark" | "default"; attempt: number };

/**
 * The rest between two renders of one diagram: at least 250 ms, and three times what the last render took, so a live
 * diagram keeps the page's main thread busy at most a quarter of the time (a 90-task plan takes a second or more).
 */
const renderGap = (lastRenderMs: number) => Math.max(250, 3 * lastRenderMs);

/**
 * A Mermaid diagram rendered to SVG in the browser. A diagram that fails to render shows its source, the error and a
 * retry button (the seed's error table), never a blank box. A new source (a live run's statuses) keeps the diagram on
 * screen until its successor is drawn, and only the newest source is rendered (latestRenderer): a burst of status
 * changes on a large plan costs two renders, not one per change.
 */
export function MermaidDiagram({ source, label = "Plan diagram" }: { source: string; label?: string }) {
  const { resolvedTheme } = useTheme();
  const reactId = useId();
  const counter = useRef(0);
  const [state, setState] = useState<State>({ kind: "loading" });
  const [attempt, setAttempt] = useState(0);
  const renderer = useRef<LatestRenderer<Wanted> | null>(null);

  useEffect(() => {
    const r = latestRenderer<Wanted, string>(
      async ({ source, theme }) => {
        const mermaid = await loadMermaid();
        mermaid.initialize({ startOnLoad: false, securityLevel: "strict", suppressErrorRendering: true, theme, fontFamily: "inherit" });
        const id = `mmd-${reactId.replace(/[^a-zA-Z0-9]/g, "")}-${++counter.current}`;
        return (await mermaid.render(id, source)).svg;
      },
      (result) =>
        setState(result.ok ? { kind: "ok", svg: result.value } : { kind: "error", message: result.error instanceof Error ? result.error.message : String(result.error) }),
      { gap: renderGap },
    );
    renderer.current = r;
    return () => {
      r.stop();
      renderer.current = null;
    };
  }, [reactId]);

  useEffect(() => {
    renderer.current?.request({ source, theme: resolvedTheme === "dark" ? "dark" : "default", attempt });
  }, [source, resolvedTheme, attempt]);

  if (state.kind === "loading") return <Skeleton className="h-48 w-full" aria-label="Rendering diagram" />;
  if (state.kind === "error") {
    return (
      <div className="space-y-2 rounded-md border border-dashed p-3" data-testid="mermaid-error" role="alert">
        <p className="text-destructive text-sm font-medium">The diagram could not be rendered.</p>
        <p className="text-muted-foreground text-xs">{state.message}</p>
        <pre className="bg-muted max-h-64 overflow-auto rounded p-2 text-xs">{source}</pre>
        <Button size="sm" variant="outline" onClick={() => setAttempt((n) => n + 1)}>
          <RotateCcw /> Retry rendering
        </Button>
      </div>
    );
  }
  return (
    <div
      role="img"
      aria-label={label}
      data-testid="mermaid-diagram"
      className="flex justify-center overflow-x-auto [&_svg]:h-auto [&_svg]:max-w-full"
      // mermaid's output with securityLevel "strict" is sanitized by mermaid (DOMPurify) before it reaches us.
      dangerouslySetInnerHTML={{ __html: state.svg }}
    />
  );
}
