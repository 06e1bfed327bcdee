import { describe, expect, it } from "vitest";
import { EnvError, parseEnv } from "./env";

describe("parseEnv", () => {
  it("gives working defaults on an empty environment: embedded mode, a file database in ./data", () => {
    const env = parseEnv({});
    expect(env.executionMode).toBe("embedded");
    expect(env.PORT).toBe(3000);
    expect(env.HOST).toBe("127.0.0.1");
    expect(env.databaseUrl).toMatch(/^file:.*data\/gatehouse\.db$/);
    expect(env.MAX_CONCURRENT_RUNS_PER_USER).toBe(5);
    expect(env.GATEHOUSE_EMBEDDED_WORKER).toBe(true);
  });

  it("switches to Inngest when any standard INNGEST_* key is set", () => {
    expect(parseEnv({ INNGEST_EVENT_KEY: "k" }).executionMode).toBe("inngest");
    expect(parseEnv({ INNGEST_SIGNING_KEY: "signkey-prod-abc" }).executionMode).toBe("inngest");
    expect(parseEnv({ INNGEST_BASE_URL: "http://127.0.0.1:8288" }).executionMode).toBe("inngest");
  });

  it.each([
    [{ PORT: "eighty" }, /PORT must be a port number/],
    [{ PORT: "70000" }, /PORT must be between 1 and 65535/],
    [{ DATABASE_URL: "postgres://x" }, /DATABASE_URL must start with file:, libsql:/],
    [{ MAX_CONCURRENT_RUNS_PER_USER: "0" }, /MAX_CONCURRENT_RUNS_PER_USER must be at least 1/],
    [{ AUTH_SECRET: "short" }, /AUTH_SECRET must be at least 32 characters/],
    [{ LOG_LEVEL: "loud" }, /LOG_LEVEL/],
    [{ GATEHOUSE_EMBEDDED_WORKER: "maybe" }, /GATEHOUSE_EMBEDDED_WORKER: must be true or false/],
    [{ OPENAI_COMPATIBLE_BASE_URL: "localhost:11434" }, /OPENAI_COMPATIBLE_BASE_URL must be an http\(s\) URL/],
    [{ GATEHOUSE_ADMIN_EMAILS: "ada@example.com, not-an-email" }, /GATEHOUSE_ADMIN_EMAILS must be a comma-separated list of email addresses/],
    [{ GATEHOUSE_REPOSITORIES_ROOT: "srv/repos" }, /GATEHOUSE_REPOSITORIES_ROOT must be an absolute path/],
  ])("refuses %j with a message naming the variable", (source, message) => {
    expect(() => parseEnv(source)).toThrow(EnvError);
    expect(() => parseEnv(source)).toThrow(message);
  });

  it("reads instance administrators as lowercased emails, none by default", () => {
    expect(parseEnv({}).GATEHOUSE_ADMIN_EMAILS).toEqual([]);
    expect(parseEnv({ GATEHOUSE_ADMIN_EMAILS: " Ada@Example.com,, grace@example.com " }).GATEHOUSE_ADMIN_EMAILS).toEqual(["ada@example.com", "grace@example.com"]);
  });

  it("treats empty strings as unset", () => {
    const env = parseEnv({ OPENAI_API_KEY: "", DATABASE_URL: "" });
    expect(env.OPENAI_API_KEY).toBeUndefined();
    expect(env.databaseUrl).toMatch(/^file:/);
  });
});
