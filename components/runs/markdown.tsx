"use client";

import { Children, isValidElement, type ReactNode } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";
import { CheckCircle2, Hourglass, XCircle } from "lucide-react";
import { cn } from "@/lib/utils";

/**
 * Status emoji in agent reports (✅ ❌ ⏳) drawn with the icon set: machines without an emoji font showed an empty box.
 * The report files in Git keep the emoji; only the dashboard swaps them.
 */
const ICONS: Array<[string, ReactNode]> = [
  ["✅", <CheckCircle2 key="ok" className="inline size-4 align-[-3px] text-emerald-600 dark:text-emerald-400" aria-label="passed" data-testid="status-icon" />],
  ["❌", <XCircle key="no" className="text-destructive inline size-4 align-[-3px]" aria-label="failed" data-testid="status-icon" />],
  ["⏳", <Hourglass key="wait" className="inline size-4 align-[-3px] text-amber-600 dark:text-amber-400" aria-label="pending" data-testid="status-icon" />],
];

function withIcons(children: ReactNode): ReactNode {
  return Children.map(children, (child) => {
    if (typeof child !== "string") return child;
    const parts: ReactNode[] = [];
    let rest = child;
    for (;;) {
      const next = ICONS.map(([emoji, icon]) => ({ at: rest.indexOf(emoji), emoji, icon })).filter((m) => m.at >= 0).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      if (next.at > 0) parts.push(rest.slice(0, next.at));
      parts.push(next.icon);
      rest = rest.slice(next.at + next.emoji.length);
    }
    if (rest) parts.push(rest);
    return parts.length === 1 ? parts[0] : <>{parts}</>;
  });
}

/**
 * A fenced block whose info string is `file:<path>` (how a request hands over a file's content) keeps its path as a
 * label above the code: react-markdown would only turn it into a class name nobody sees.
 */
function fileLabel(children: ReactNode): string | null {
  const code = Children.toArray(children)[0];
  if (!isValidElement<{ className?: string }>(code)) return null;
  const match = /(?:^|\s)language-file:(\S+)/.exec(code.props.className ?? "");
  return match ? match[1]! : null;
}

const COMPONENTS: Components = {
  pre: ({ children, node: _node, ...props }) => {
    const file = fileLabel(children);
    if (!file) return <pre {...props}>{children}</pre>;
    return (
      <figure className="my-2">
        <figcaption className="text-muted-foreground mb-1 font-mono text-xs" data-testid="code-file-label">
          file: {file}
        </figcaption>
        <pre {...props} className="!my-0">
          {children}
        </pre>
      </figure>
    );
  },
  td: ({ children, node: _node, ...props }) => <td {...props}>{withIcons(children)}</td>,
  li: ({ children, node: _node, ...props }) => <li {...props}>{withIcons(children)}</li>,
  p: ({ children, node: _node, ...props }) => <p {...props}>{withIcons(children)}</p>,
};

/**
 * Markdown from agents (validation reports, memory): raw HTML is not rendered (react-markdown escapes it unless a
 * rehype-raw plugin is added), and link URLs pass react-markdown's default safe-URL filter.
 */
export function Markdown({ children, className }: { children: string; className?: string }) {
  return (
    <div
      className={cn(
        "text-sm leading-relaxed break-words [&_a]:underline [&_code]:bg-muted [&_code]:rounded [&_code]:px-1 [&_code]:font-mono [&_code]:text-xs [&_h1]:mt-4 [&_h1]:text-lg [&_h1]:font-semibold [&_h2]:mt-4 [&_h2]:text-base [&_h2]:font-semibold [&_h3]:mt-3 [&_h3]:font-semibold [&_li]:my-0.5 [&_ol]:list-decimal [&_ol]:pl-5 [&_p]:my-2 [&_pre]:bg-muted [&_pre]:overflow-x-auto [&_pre]:rounded-md [&_pre]:p-3 [&_pre_code]:bg-transparent [&_pre_code]:p-0 [&_table]:my-2 [&_table]:w-full [&_table]:text-left [&_td]:border [&_td]:px-2 [&_td]:py-1 [&_th]:border [&_th]:px-2 [&_th]:py-1 [&_ul]:list-disc [&_ul]:pl-5",
        className,
      )}
    >
      <ReactMarkdown remarkPlugins={[remarkGfm]} components={COMPONENTS}>
        {children}
      </ReactMarkdown>
    </div>
  );
}
