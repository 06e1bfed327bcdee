/*
 * Fake credentials in the shapes real ones have. Built from parts at run time so that this file itself never contains
 * a credential-shaped string (the start-up scan would rightly flag it).
 */
const j = (...parts: string[]) => parts.join("");

export const FAKE = {
  openai: j("sk-", "proj-", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"),
  anthropic: j("sk-", "ant-", "api03-", "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"),
  github: j("gh", "p_", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"),
  aws: j("AK", "IA", "IOSFODNN7EXAMPLE"),
  privateKey: [
    j("-----BEGIN ", "RSA PRIVATE KEY-----"),
    "MIIEowIBAAKCAQEA7Vq0fakefakefakefakefakefakefakefakefakefakefake",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    j("-----END ", "RSA PRIVATE KEY-----"),
  ].join("\n"),
};

/** Model or command output that leaks all of them. */
export function leakyOutput(): string {
  return [
    `export OPENAI_API_KEY=${FAKE.openai}`,
    `anthropic: ${FAKE.anthropic}`,
    `git remote set-url origin https://x-access-token:${FAKE.github}@github.com/acme/app.git`,
    `aws_access_key_id = ${FAKE.aws}`,
    FAKE.privateKey,
    "done.",
  ].join("\n");
}
