// The address policy moved to the base (lib/address-policy.ts): remote MCP servers (lib/agents/mcp) follow it too.
export * from "@/lib/address-policy";
