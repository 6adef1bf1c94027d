// Cairn's own runner: a client of gitlab-runner's HTTP protocol with a shell executor.
export { RunnerClient, ProtocolError } from './client.js';
export { Runner, startBuiltinRunner, unisolatedAllowed, defaultBuildsDir, NoIsolationError } from './runner.js';
export type { BuiltinRunner, BuiltinRunnerOptions, RunnerOptions } from './runner.js';
export { executeJob } from './job.js';
export type { ExecutorOptions, JobOutcome } from './job.js';
export { detectSandbox } from './sandbox.js';
export type { JobPayload } from './types.js';
