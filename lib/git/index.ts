export { createRunBranch, latestBase } from "./branch";
export { commitCheckpoint, commitWorkInProgress, lastCheckpoint, nothingToCommit, restoreFilesToBase, rollbackToCheckpoint, workspaceTree, type Checkpoint, type GitWorkspace } from "./checkpoint";
export { commitFiles, commitMessage, readFileAt, type CommitResult } from "./commit-files";
export { CONFIG_PATH, MEMORY_PATH, parseMemory, MEMORY_SNAPSHOT_MAX_CHARS, readLatestMemory, readMemory, readMemorySnapshot, readProjectConfig, renderMemory, updateMemory, type ProjectMemory } from "./memory";
export { squashMerge, type MergeResult } from "./merge";
export { cutTaskBranch, deleteTaskBranch, deleteTaskBranches, mergeTaskBranches, taskBranchName, type ConflictSide, type OnTopOfMerges, type TaskMergeResult } from "./task-branch";
export { rebuildFromGit, type RebuildResult } from "./rebuild";
export {
  buildRunContext,
  clarificationFromRow,
  commitRunRecords,
  commitSpec,
  parseEvents,
  parseRunContext,
  parseSpec,
  readRunContext,
  renderSpec,
  runContextSchema,
  serializeEvents,
  type RunContext,
  type SpecTask,
} from "./records";
export { DIFF_SAFE, GATEHOUSE_IDENTITY, git, resolveCommit, type WorktreeLocation } from "./run";
