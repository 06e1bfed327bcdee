import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import { getEnv } from "@/lib/env";

/*
 * A project owner chooses where webhooks, SMTP connections and remote MCP servers go, and the server makes those connections: without a
 * rule, an owner could aim them at the server's own network (127.0.0.1, 10.0.0.0/8, a cloud metadata address at
 * 169.254.169.254) and use the delivery log to probe it. So by default a channel may only reach public unicast
 * addresses; GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES=allow permits private ones (an internal mail relay, a receiver on this
 * machine). The host is resolved and every address it resolves to is checked just before each connection; a DNS
 * answer that changes between the check and the connection is not covered (the connection resolves again).
 */

/** Why an address is refused, or null when it is a public unicast address (ipaddr.js's range names). */
export function privateRange(address: string): string | null {
  if (!ipaddr.isValid(address)) return "not an IP address";
  const range = ipaddr.process(address).range();
  return range === "unicast" ? null : range;
}

function allowPrivate(): boolean {
  return getEnv().GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES === "allow";
}

const HINT = "set GATEHOUSE_NOTIFY_PRIVATE_ADDRESSES=allow to permit private addresses";

/**
 * For config-time validation (no DNS): why `host` is refused when it is a literal private address or `localhost`;
 * null otherwise. Names are checked again, resolved, at send time (assertReachableHost).
 */
export function literalHostProblem(host: string): string | null {
  if (allowPrivate()) return null;
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (bare === "localhost" || bare.endsWith(".localhost")) return `${host} is this machine (${HINT})`;
  if (!ipaddr.isValid(bare)) return null;
  const range = privateRange(bare);
  return range ? `${host} is a ${range} address, not a public one (${HINT})` : null;
}

/** Resolve `host` and throw unless every address it resolves to is public unicast (or private ones are allowed). */
export async function assertReachableHost(host: string): Promise<void> {
  if (allowPrivate()) return;
  const bare = host.replace(/^\[|\]$/g, "");
  const addresses = ipaddr.isValid(bare) ? [bare] : (await lookup(bare, { all: true, verbatim: true })).map((a) => a.address);
  for (const address of addresses) {
    const range = privateRange(address);
    if (range) throw new Error(`${host} resolves to ${address}, a ${range} address; refused (${HINT})`);
  }
}
