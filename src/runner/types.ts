// The job payload of POST /api/v4/jobs/request (201), as gitlab-runner reads it. Only the
// fields the shell executor uses are typed; everything is optional because any server may send it.

export interface JobVariable {
  key: string;
  value: string;
  public?: boolean;
  file?: boolean;
  masked?: boolean;
  raw?: boolean;
}

export interface JobStep {
  name: string; // script | after_script | release ...
  script: string[];
  timeout?: number;
  when?: 'on_success' | 'on_failure' | 'always' | string;
  allow_failure?: boolean;
}

export interface JobArtifact {
  name?: string;
  untracked?: boolean;
  paths?: string[];
  exclude?: string[];
  when?: 'on_success' | 'on_failure' | 'always' | string;
  artifact_type?: string;
  artifact_format?: string;
  expire_in?: string | null;
}

export interface JobDependency {
  id: number;
  token: string;
  name?: string;
  artifacts_file?: { filename?: string; size?: number } | null;
}

export interface JobPayload {
  id: number;
  token: string;
  allow_git_fetch?: boolean;
  job_info?: { name?: string; stage?: string; project_id?: number; project_name?: string; pipeline_id?: number };
  git_info: {
    repo_url: string;
    ref?: string;
    sha: string;
    before_sha?: string;
    ref_type?: 'branch' | 'tag' | string;
    refspecs?: string[];
    depth?: number;
  };
  runner_info?: { timeout?: number };
  variables?: JobVariable[];
  steps?: JobStep[];
  image?: unknown;
  services?: unknown[];
  artifacts?: JobArtifact[] | null;
  cache?: unknown[];
  dependencies?: JobDependency[];
  features?: { trace_sections?: boolean; failure_reasons?: string[] };
}
