"use client";

import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { ThemeProvider } from "next-themes";
import { useState } from "react";

/*
 * next-themes renders an inline script that sets the theme before the page paints. It runs from the server's HTML; a copy
 * React creates in the browser (when a root remounts, e.g. a not-found page) never runs, and React 19 logs "Encountered a
 * script tag while rendering React component" for it. In the browser the script is therefore marked as a data block,
 * which React creates silently (hydration ignores the differing attribute: next-themes sets suppressHydrationWarning).
 */
const THEME_SCRIPT_PROPS = typeof window === "undefined" ? undefined : { type: "application/json" };

export function Providers({ children, nonce }: { children: React.ReactNode; nonce?: string }) {
  const [client] = useState(
    () => new QueryClient({ defaultOptions: { queries: { staleTime: 1_000, retry: 1, refetchOnWindowFocus: true } } }),
  );
  return (
    <ThemeProvider attribute="class" defaultTheme="system" enableSystem disableTransitionOnChange nonce={nonce} scriptProps={THEME_SCRIPT_PROPS}>
      <QueryClientProvider client={client}>{children}</QueryClientProvider>
    </ThemeProvider>
  );
}
