/*
 * What the sign-in page says to the owner. Plain strings with no server imports: the sign-in form is a client component,
 * and the server (banner, the link script) names the same command.
 */

/** The command that prints a fresh one-time owner sign-in link while the server runs (scripts/sign-in-link.ts). */
export const SIGN_IN_LINK_COMMAND = "npm run sign-in-link";

/** How long a one-time link is valid, in words (lib/auth/login-link.ts's TTL). */
export const SIGN_IN_LINK_VALIDITY = "valid for 24 hours, works once";

const GET_A_LINK = `run \`${SIGN_IN_LINK_COMMAND}\` in the server's directory (the server keeps running) and open the link it prints`;

/** The line under the title: how the owner gets in with what this server offers. */
export function signInHelp({ hasPassword, hasProviders }: { hasPassword: boolean; hasProviders: boolean }): string {
  if (hasProviders) return "Continue with your organisation's account.";
  if (hasPassword) return `Use the owner password (GATEHOUSE_ADMIN_PASSWORD), or for a one-time sign-in link ${GET_A_LINK}.`;
  return `No owner password is set on this server. To sign in, ${GET_A_LINK}.`;
}

/** The message for an Auth.js error code on the sign-in page: what happened and what to do now. */
export function signInErrorMessage({ error, hasPassword }: { error: string; hasPassword: boolean }): string {
  switch (error) {
    case "CredentialsSignin":
      return hasPassword
        ? `That password or sign-in link is not valid (a link works once, for 24 hours). Check the password, or for a new link ${GET_A_LINK}.`
        : `That sign-in link was already used or has expired (a link works once, for 24 hours). For a new one, ${GET_A_LINK}.`;
    case "Configuration":
      return "Sign-in is not configured on this server. See “Signing in” in the README.";
    case "OAuthAccountNotLinked":
      return "That email already belongs to another sign-in method. Use the one you used first.";
    case "AccessDenied":
      return "Sign-in was refused.";
    default:
      return `Sign-in failed. Try again, or for a one-time owner link ${GET_A_LINK}.`;
  }
}
