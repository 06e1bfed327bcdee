"use client";

import { useEffect, useRef, useState } from "react";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/components/ui/card";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { signInErrorMessage, signInHelp } from "@/lib/auth/sign-in-help";

export type SignInProvider = { id: string; name: string };

/**
 * One button per configured provider (GitHub, OIDC), each a form POST to Auth.js with its CSRF token; then the local
 * owner's password. A one-time link (?token=) signs in by itself.
 */
export function SignInForm({
  callbackUrl,
  error,
  token,
  providers = [],
  hasPassword = true,
}: {
  callbackUrl: string;
  error?: string;
  token?: string;
  providers?: SignInProvider[];
  hasPassword?: boolean;
}) {
  const [csrfToken, setCsrfToken] = useState<string | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const formRef = useRef<HTMLFormElement>(null);

  useEffect(() => {
    fetch("/api/auth/csrf")
      .then((r) => r.json())
      .then((body: { csrfToken: string }) => setCsrfToken(body.csrfToken))
      .catch(() => setLoadError("Could not reach the server. Is it running?"));
  }, []);

  useEffect(() => {
    if (token && csrfToken && !error) formRef.current?.requestSubmit();
  }, [token, csrfToken, error]);

  return (
    <Card className="w-full max-w-sm">
      <CardHeader>
        <CardTitle>Sign in to Gatehouse</CardTitle>
        <CardDescription>
          {signInHelp({ hasPassword, hasProviders: providers.length > 0 })}
        </CardDescription>
      </CardHeader>
      <CardContent className="space-y-4">
        {providers.map((p) => (
          <form key={p.id} method="post" action={`/api/auth/signin/${p.id}`}>
            <input type="hidden" name="csrfToken" value={csrfToken ?? ""} />
            <input type="hidden" name="callbackUrl" value={callbackUrl} />
            <Button type="submit" variant="outline" className="w-full" disabled={!csrfToken} data-testid={`sign-in-${p.id}`}>
              Continue with {p.name}
            </Button>
          </form>
        ))}
        {providers.length && (hasPassword || token) ? (
          <p className="text-muted-foreground text-center text-xs">or, as the owner of this server</p>
        ) : null}
        <form ref={formRef} method="post" action="/api/auth/callback/local" className="space-y-4">
          <input type="hidden" name="csrfToken" value={csrfToken ?? ""} />
          <input type="hidden" name="callbackUrl" value={callbackUrl} />
          {token ? <input type="hidden" name="token" value={token} /> : null}
          {/* No password field for a password that was never set: the help above says how to get a link. */}
          {hasPassword ? (
            <div className="space-y-2">
              <Label htmlFor="password">Password</Label>
              <Input id="password" name="password" type="password" autoComplete="current-password" autoFocus={!token && !providers.length} />
            </div>
          ) : null}
          {error || loadError ? (
            <p role="alert" className="text-destructive text-sm">
              {loadError ?? signInErrorMessage({ error: error!, hasPassword })}
            </p>
          ) : null}
          {hasPassword || token ? (
            <Button type="submit" className="w-full" disabled={!csrfToken} data-testid="sign-in">
              Sign in
            </Button>
          ) : null}
        </form>
      </CardContent>
    </Card>
  );
}
