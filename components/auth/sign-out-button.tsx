"use client";

import { useState } from "react";
import { Button } from "@/components/ui/button";

/** Auth.js sign-out: a POST with its CSRF token, then back to the sign-in page. */
export function SignOutButton() {
  const [busy, setBusy] = useState(false);
  async function signOut() {
    setBusy(true);
    const { csrfToken } = (await fetch("/api/auth/csrf").then((r) => r.json())) as { csrfToken: string };
    await fetch("/api/auth/signout", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-auth-return-redirect": "1" },
      body: new URLSearchParams({ csrfToken, callbackUrl: "/signin" }),
    });
    window.location.href = "/signin";
  }
  return (
    <Button variant="ghost" size="sm" onClick={signOut} disabled={busy} data-testid="sign-out">
      Sign out
    </Button>
  );
}
