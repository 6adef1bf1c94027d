// The `release` step of a job with `release:` in its .gitlab-ci.yml (issue #32), as GitLab's
// job payload has it: after `script`, when: on_success, not allowed to fail, the job's timeout,
// and one script that creates the release with `glab release create` when glab (1.58.0 or
// newer) is in the job's image, else with `release-cli create` (learnt from GitLab's
// Gitlab::Ci::Build::Releaser and Step.from_release: behaviour, not code).
//
// Every value of `release:` goes into the script inside double quotes, as GitLab's does, so
// the job's shell expands CI variables in them ($CI_COMMIT_TAG, ${CI_COMMIT_SHA}). Unlike
// GitLab's, nothing else is live: only `$NAME` and `${NAME}` references stay unescaped; every
// other `$` (command substitution `$(...)`, arithmetic, `${X:-...}` operators), backquotes,
// double quotes and backslashes are escaped, so a value can never run a command.
// Cairn's runner may perform this step itself (src/runner/release.ts reads the
// `release-cli create` line back).

export const RELEASE_STEP_NAME = 'release';
export const GLAB_MIN_VERSION = '1.58.0';

export interface ReleaseConfig {
  tag_name?: string;
  tag_message?: string;
  name?: string;
  description?: string;
  ref?: string;
  released_at?: string;
  milestones?: string[] | string;
  assets?: { links?: Array<Record<string, unknown>> };
}

const REF = /^\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})/;

/**
 * A value inside double quotes for sh/bash: `$NAME` and `${NAME}` expand in the job's shell (a
 * variable's value is never re-parsed by the shell), `$$` is a literal `$` (as in GitLab's
 * variable syntax); `"`, `\`, backquote and any other `$` are escaped. Newlines stay literal
 * inside the quotes.
 */
export function shellDoubleQuote(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; ) {
    const c = value[i];
    if (c === '$') {
      if (value[i + 1] === '$') {
        out += '\\$';
        i += 2;
        continue;
      }
      const m = REF.exec(value.slice(i));
      if (m) {
        out += m[0];
        i += m[0].length;
        continue;
      }
      out += '\\$';
    } else if (c === '"' || c === '\\' || c === '`') out += `\\${c}`;
    else if (c === '\0') {
      // A shell word cannot hold NUL; it is dropped.
    } else out += c;
    i++;
  }
  return `"${out}"`;
}

function present(v: unknown): v is string {
  return typeof v === 'string' && v !== '';
}

function milestoneList(v: ReleaseConfig['milestones']): string[] {
  if (Array.isArray(v)) return v.filter((m): m is string => typeof m === 'string');
  return typeof v === 'string' && v !== '' ? [v] : [];
}

function links(config: ReleaseConfig): Array<Record<string, unknown>> {
  return Array.isArray(config.assets?.links) ? config.assets!.links! : [];
}

/** The `release-cli create ...` command line: each field in the order GitLab writes them. */
export function releaseCliCommand(config: ReleaseConfig): string {
  const parts = ['release-cli create'];
  const single: Array<[keyof ReleaseConfig, string]> = [
    ['name', '--name'], ['description', '--description'], ['tag_name', '--tag-name'],
    ['tag_message', '--tag-message'], ['ref', '--ref'], ['released_at', '--released-at'],
  ];
  for (const [key, flag] of single) {
    const v = config[key];
    if (typeof v === 'string') parts.push(`${flag} ${shellDoubleQuote(v)}`);
  }
  for (const m of milestoneList(config.milestones)) parts.push(`--milestone ${shellDoubleQuote(m)}`);
  // Each link as a JSON document, itself a double-quoted shell word (variables expand in it).
  for (const link of links(config)) parts.push(`--assets-link ${shellDoubleQuote(JSON.stringify(link))}`);
  return parts.join(' ');
}

/** `glab release create ...`: tag and ref default to the pipeline's tag and commit. */
export function glabCreateCommand(config: ReleaseConfig): string {
  const parts = ['glab release create -R $CI_PROJECT_PATH'];
  parts.push(present(config.tag_name) ? shellDoubleQuote(config.tag_name) : '"$CI_COMMIT_TAG"');
  const l = links(config);
  if (l.length) parts.push(`--assets-links ${shellDoubleQuote(JSON.stringify(l))}`);
  const milestones = milestoneList(config.milestones);
  if (milestones.length) parts.push(`--milestone ${shellDoubleQuote(milestones.join(','))}`);
  if (present(config.name)) parts.push(`--name ${shellDoubleQuote(config.name)}`);
  if (present(config.description)) parts.push(`--experimental-notes-text-or-file ${shellDoubleQuote(config.description)}`);
  parts.push(`--ref ${present(config.ref) ? shellDoubleQuote(config.ref) : '"$CI_COMMIT_SHA"'}`);
  if (present(config.tag_message)) parts.push(`--tag-message ${shellDoubleQuote(config.tag_message)}`);
  if (present(config.released_at)) parts.push(`--released-at ${shellDoubleQuote(config.released_at)}`);
  parts.push('--no-update --no-close-milestone');
  return parts.join(' ');
}

/** The release step's one script (POSIX sh and bash): glab when new enough, else release-cli. */
export function releaseScript(config: ReleaseConfig): string {
  const warning = `Warning: release-cli will not be supported after 20.0. Please use glab version >= ${GLAB_MIN_VERSION}.`;
  const cli = releaseCliCommand(config);
  return [
    'if command -v glab > /dev/null 2>&1; then',
    `  if [ "$(printf "%s\\n%s" "${GLAB_MIN_VERSION}" "$(glab --version | grep -oE '[0-9]+\\.[0-9]+\\.[0-9]+' | head -n1)" | sort -V | head -n1)" = "${GLAB_MIN_VERSION}" ]; then`,
    '    export GITLAB_HOST=$CI_SERVER_URL',
    '    glab auth login --job-token $CI_JOB_TOKEN --hostname "$CI_SERVER_FQDN" --api-protocol $CI_SERVER_PROTOCOL',
    `    ${glabCreateCommand(config)}`,
    '  else',
    `    echo "${warning}"`,
    `    ${cli}`,
    '  fi',
    'else',
    `  echo "${warning}"`,
    `  ${cli}`,
    'fi',
    '',
  ].join('\n');
}

/** The step for a job's `release:` (null without one). */
export function releaseStep(release: unknown, timeout: number): Record<string, unknown> | null {
  if (!release || typeof release !== 'object' || Array.isArray(release)) return null;
  return { name: RELEASE_STEP_NAME, script: [releaseScript(release as ReleaseConfig)], timeout, when: 'on_success', allow_failure: false };
}
