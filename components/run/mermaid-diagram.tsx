"use client";

import { useCallback, useEffect, useId, useRef, useState } from "react";
import { useTheme } from "next-themes";
import { RotateCcw } from "lucide-react";
import { Button } from "@/components/ui/button";
import { Skeleton } from "@/components/ui/skeleton";

type MermaidApi = typeof import("mermaid").default;
let loading: Promise<MermaidApi> | null = null;

/** mermaid is large: load it only when a diagram is on screen. */
export function loadMermaid(): Promise<MermaidApi> {
  loading ??= import("mermaid").then((m) => m.default);
  return loading;
}

type State = { kind: "loading" } | { kind: "ok"; svg: string } | { kind: "error"; message: string };

/**
 * A Mermaid diagram rendered to SVG in the browser. A diagram that fails to render shows its source, the error and a
 * retry button (the seed's error table), never a blank box.
 */
export function MermaidDiagram({ source, label = "Plan diagram" }: { source: string; label?: string }) {
  const { resolvedTheme } = useTheme();
  const reactId = useId();
  const counter = useRef(0);
  const [state, setState] = useState<State>({ kind: "loading" });
  const [attempt, setAttempt] = useState(0);

  const render = useCallback(async () => {
    const mermaid = await loadMermaid();
    mermaid.initialize({
      startOnLoad: false,
      securityLevel: "strict",
      suppressErrorRendering: true,
      theme: resolvedTheme === "dark" ? "dark" : "default",
      fontFamily: "inherit",
    });
    const id = `mmd-${reactId.replace(/[^a-zA-Z0-9]/g, "")}-${++counter.current}`;
    const { svg } = await mermaid.render(id, source);
    return svg;
  }, [source, resolvedTheme, reactId]);

  useEffect(() => {
    let cancelled = false;
    setState({ kind: "loading" });
    render()
      .then((svg) => !cancelled && setState({ kind: "ok", svg }))
      .catch((error: unknown) => {
        if (!cancelled) setState({ kind: "error", message: error instanceof Error ? error.message : String(error) });
      });
    return () => {
      cancelled = true;
    };
  }, [render, attempt]);

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
