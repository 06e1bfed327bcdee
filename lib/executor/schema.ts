// The embedded executor's tables are defined here (see lib/executor). Placeholder until the executor lands.
export {};
