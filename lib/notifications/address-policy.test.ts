import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { resetEnvCache } from "@/lib/env";
import { assertReachableHost, literalHostProblem, privateRange } from "./address-policy";
import { projectConfigSchemas } from "./channels";

describe("notification address policy", () => {
  let saved: string | undefined;
  beforeEach(() => {
    saved = process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES;
    process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES = "deny";
    resetEnvCache();
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES;
    else process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES = saved;
    resetEnvCache();
  });

  it("names the range of every non-public address, including IPv4-mapped IPv6, and passes public ones", () => {
    expect(privateRange("127.0.0.1")).toBe("loopback");
    expect(privateRange("10.1.2.3")).toBe("private");
    expect(privateRange("192.168.0.10")).toBe("private");
    expect(privateRange("169.254.169.254")).toBe("linkLocal");
    expect(privateRange("::1")).toBe("loopback");
    expect(privateRange("::ffff:127.0.0.1")).toBe("loopback");
    expect(privateRange("fd00::1")).toBe("uniqueLocal");
    expect(privateRange("0.0.0.0")).toBe("unspecified");
    expect(privateRange("93.184.216.34")).toBeNull();
    expect(privateRange("2606:4700::1111")).toBeNull();
  });

  it("refuses a webhook URL or SMTP host that is a literal private address or localhost, with what to change", () => {
    for (const url of ["http://127.0.0.1:9/hook", "http://169.254.169.254/latest/meta-data", "http://[::1]/x", "http://localhost:3000/x"]) {
      const parsed = projectConfigSchemas.webhook.safeParse({ url });
      expect(parsed.success, url).toBe(false);
      expect(parsed.error!.issues[0]!.message).toMatch(/GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES=allow/);
    }
    expect(projectConfigSchemas.webhook.safeParse({ url: "https://hooks.example.com/gatehouse" }).success).toBe(true);
    const smtp = { port: 25, from: "gh@example.com", to: ["team@example.com"] };
    expect(projectConfigSchemas.email.safeParse({ ...smtp, host: "10.0.0.5" }).success).toBe(false);
    expect(projectConfigSchemas.email.safeParse({ ...smtp, host: "smtp.example.com" }).success).toBe(true);
    expect(literalHostProblem("example.com")).toBeNull();
  });

  it("at send time resolves the host and refuses it when any address is private", async () => {
    await expect(assertReachableHost("localhost")).rejects.toThrow(/localhost resolves to .*(loopback).*refused/);
    await expect(assertReachableHost("127.0.0.2")).rejects.toThrow(/loopback/);
    await expect(assertReachableHost("93.184.216.34")).resolves.toBeUndefined();
  });

  it("allow lets private addresses through, for an internal relay or a receiver on this machine", async () => {
    process.env.GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES = "allow";
    resetEnvCache();
    expect(projectConfigSchemas.webhook.safeParse({ url: "http://127.0.0.1:9/hook" }).success).toBe(true);
    await expect(assertReachableHost("localhost")).resolves.toBeUndefined();
  });
});
