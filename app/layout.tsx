import type { Metadata } from "next";
import { headers } from "next/headers";
import { Providers } from "@/components/providers";
import "./globals.css";

export const metadata: Metadata = {
  title: "Gatehouse",
  description: "Plan → approve → implement → validate → deliver: autonomous coding runs with a human at the gate.",
  // public/: favicon.ico for clients that ask for it by name, the SVG for browsers, a 32 px PNG, and the 180 px touch icon.
  icons: {
    icon: [{ url: "/icon.svg", type: "image/svg+xml" }, { url: "/favicon.ico", sizes: "32x32" }, { url: "/icon.png", sizes: "32x32", type: "image/png" }],
    apple: { url: "/apple-touch-icon.png", sizes: "180x180" },
  },
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
