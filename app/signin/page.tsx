import { SignInForm } from "@/components/auth/sign-in-form";
import { getEnv } from "@/lib/env";
import { signInMethods } from "@/lib/auth/providers";

export const dynamic = "force-dynamic";

export default async function SignInPage({
  searchParams,
}: {
  searchParams: Promise<{ callbackUrl?: string; error?: string; token?: string }>;
}) {
  const { callbackUrl, error, token } = await searchParams;
  // Only same-site paths as callback targets (no open redirect).
  const target = callbackUrl && callbackUrl.startsWith("/") && !callbackUrl.startsWith("//") ? callbackUrl : "/";
  const env = getEnv();
  const providers = signInMethods(env)
    .filter((m) => m.type !== "local")
    .map(({ id, name }) => ({ id, name }));
  return (
    <main className="flex min-h-screen items-center justify-center p-4">
      <SignInForm
        callbackUrl={target}
        error={error}
        token={token}
        providers={providers}
        hasPassword={!!env.GATEHOUSE_ADMIN_PASSWORD}
      />
    </main>
  );
}
