"use client";

import { useMemo } from "react";
import { Diff, Hunk, parseDiff, type FileData } from "react-diff-view";
import "react-diff-view/style/index.css";
import "./diff-view.css";

function fileName(file: FileData): string {
  if (file.type === "delete") return file.oldPath;
  if (file.type === "rename") return `${file.oldPath} → ${file.newPath}`;
  return file.newPath || file.oldPath;
}

/** A unified diff (git format) rendered file by file with react-diff-view. */
export function DiffView({ diff, viewType = "unified", testId }: { diff: string; viewType?: "unified" | "split"; testId?: string }) {
  const files = useMemo(() => {
    try {
      return parseDiff(diff, { nearbySequences: "zip" });
    } catch {
      return null;
    }
  }, [diff]);
  if (!files) {
    return (
      <pre className="bg-muted overflow-x-auto rounded-md p-3 text-xs" data-testid={testId}>
        {diff}
      </pre>
    );
  }
  if (files.length === 0) return <p className="text-muted-foreground text-sm">No changes.</p>;
  return (
    <div className="space-y-4" data-testid={testId}>
      {files.map((file) => (
        <section key={`${file.oldRevision}-${file.newRevision}-${fileName(file)}`} className="overflow-hidden rounded-md border">
          <header className="bg-muted/60 flex items-center gap-2 border-b px-3 py-1.5 font-mono text-xs">
            <span className="text-muted-foreground uppercase">{file.type}</span>
            <span className="truncate">{fileName(file)}</span>
          </header>
          <div className="overflow-x-auto">
            <Diff viewType={viewType} diffType={file.type} hunks={file.hunks} className="gh-diff">
              {(hunks) => hunks.map((hunk) => <Hunk key={hunk.content} hunk={hunk} />)}
            </Diff>
          </div>
        </section>
      ))}
    </div>
  );
}
