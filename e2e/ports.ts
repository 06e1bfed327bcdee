import { execFileSync } from "node:child_process";

/*
 * The e2e server and the OIDC provider listen on free loopback ports, so two checkouts can run `npm test` on one machine.
 * The Playwright runner loads its config first and finds the ports once; its workers (and the web server) inherit them
 * through the environment. Set GATEHOUSE_E2E_PORT / GATEHOUSE_E2E_OIDC_PORT to choose them yourself.
 */
const NAMES = ["GATEHOUSE_E2E_PORT", "GATEHOUSE_E2E_OIDC_PORT"] as const;

/** Ports the kernel hands out for listen(0), held open together so they are distinct, then released. */
function freePorts(count: number): number[] {
  const script = `const net=require("node:net");const s=[];let n=${count};
for(let i=0;i<n;i++){const x=net.createServer();s.push(x);x.listen(0,"127.0.0.1",()=>{if(--n===0){console.log(s.map(y=>y.address().port).join(" "));s.forEach(y=>y.close())}})}`;
  return execFileSync(process.execPath, ["-e", script], { encoding: "utf8" }).trim().split(" ").map(Number);
}

function ports(): Record<(typeof NAMES)[number], number> {
  const given = NAMES.map((name) => Number(process.env[name]));
  if (!given.every((p) => Number.isInteger(p) && p > 0 && p < 65536)) {
    const found = freePorts(NAMES.length);
    NAMES.forEach((name, i) => {
      process.env[name] = String(found[i]);
    });
  }
  return { GATEHOUSE_E2E_PORT: Number(process.env.GATEHOUSE_E2E_PORT), GATEHOUSE_E2E_OIDC_PORT: Number(process.env.GATEHOUSE_E2E_OIDC_PORT) };
}

export const E2E_PORTS = ports();
