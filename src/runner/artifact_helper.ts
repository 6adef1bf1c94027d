// Entry point run INSIDE a job's sandbox, as the job's user (artifact_sandbox.ts starts it
// through bwrap), for the artifact work on the job's files: the kernel then applies the job's
// own rights on top of the no-follow walk of artifacts.ts. Its only argument is one JSON
// request; the archive to extract is its standard input (a descriptor the runner opened) and
// the archive it writes is its standard output (a file the runner created), so the job's user
// needs no access to the runner's directories. The answer is one line on standard error,
// after RESULT_MARK. Nothing of the job's environment reaches it.
import { RESULT_MARK, runHelperRequest, type HelperRequest } from './artifacts.js';

const result = await runHelperRequest(JSON.parse(process.argv[2] ?? '{}') as HelperRequest);
process.stderr.write(`${RESULT_MARK}${JSON.stringify(result)}\n`, () => process.exit(result.ok ? 0 : 1));
