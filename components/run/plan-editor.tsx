"use client";

import { useEffect, useState } from "react";
import { Textarea } from "@/components/ui/textarea";
import { Label } from "@/components/ui/label";
import { apiSend } from "@/components/runs/api";
import { MermaidDiagram } from "./mermaid-diagram";

export type Validity = { state: "checking" } | { state: "valid"; kind: string } | { state: "invalid"; message: string; line: number | null };

/** Edit a plan's Mermaid source with a live preview and the server's own grammar check (debounced). */
export function PlanEditor({ value, onChange, onValidity }: { value: string; onChange: (v: string) => void; onValidity: (v: Validity) => void }) {
  const [preview, setPreview] = useState(value);
  const [validity, setValidity] = useState<Validity>({ state: "checking" });

  useEffect(() => {
    setValidity({ state: "checking" });
    onValidity({ state: "checking" });
    let cancelled = false;
    const timer = setTimeout(async () => {
      let next: Validity;
      try {
        const r = await apiSend<{ valid: boolean; kind?: string; error?: { message: string; line: number | null } }>("/api/mermaid/validate", { source: value });
        next = r.valid ? { state: "valid", kind: r.kind ?? "diagram" } : { state: "invalid", message: r.error?.message ?? "Invalid Mermaid.", line: r.error?.line ?? null };
      } catch (error) {
        next = { state: "invalid", message: `Could not check the diagram: ${error instanceof Error ? error.message : String(error)}`, line: null };
      }
      if (cancelled) return;
      setValidity(next);
      onValidity(next);
      if (next.state === "valid") setPreview(value);
    }, 400);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
    // onValidity is a setter from the parent; re-checking only when the source changes.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [value]);

  return (
    <div className="grid gap-4 lg:grid-cols-2" data-testid="plan-editor">
      <div className="grid content-start gap-2">
        <Label htmlFor="plan-mermaid">Mermaid source</Label>
        <Textarea
          id="plan-mermaid"
          value={value}
          onChange={(e) => onChange(e.target.value)}
          rows={16}
          spellCheck={false}
          className="font-mono text-xs"
          aria-invalid={validity.state === "invalid"}
          aria-describedby="plan-mermaid-status"
        />
        <p id="plan-mermaid-status" role="status" className="text-xs" data-testid="mermaid-validity" data-state={validity.state}>
          {validity.state === "checking" && <span className="text-muted-foreground">Checking…</span>}
          {validity.state === "valid" && <span className="text-emerald-600 dark:text-emerald-400">Valid {validity.kind}.</span>}
          {validity.state === "invalid" && <span className="text-destructive">{validity.message}</span>}
        </p>
      </div>
      <div className="grid content-start gap-2">
        <span className="text-sm font-medium">Preview{validity.state === "invalid" ? " (last valid version)" : ""}</span>
        <div className="bg-background rounded-md border p-3">
          <MermaidDiagram source={preview} label="Edited plan preview" />
        </div>
      </div>
    </div>
  );
}
