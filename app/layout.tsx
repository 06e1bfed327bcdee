import type { Metadata } from "next";
import { headers } from "next/headers";
import { Providers } from "@/components/providers";
import "./globals.css";

export const metadata: Metadata = {
  title: "Gatehouse",
  description: "Plan → approve → implement → validate → deliver: autonomous coding runs with a human at the gate.",
  // public/: favicon.ico for clients that ask for it by name, the SVG for browsers, the PNG for touch icons.
  icons: { icon: [{ url: "/icon.svg", type: "image/svg+xml" }, { url: "/favicon.ico", sizes: "32x32" }], apple: "/icon.png" },
};

export default async function RootLayout({ children }: { children: React.ReactNode }) {
  // The per-request CSP nonce from proxy.ts (reading it also keeps every page dynamic, which a nonce requires).
  const nonce = (await headers()).get("x-nonce") ?? undefined;
  return (
    <html lang="en" suppressHydrationWarning>
      <body className="min-h-screen antialiased">
        <Providers nonce={nonce}>{children}</Providers>
      </body>
    </html>
  );
}
