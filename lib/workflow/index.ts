export * from "./config";
export * from "./events";
export * from "./types";
export * from "./reducer";
export * from "./task-rounds";
