-- The leakproof store's schema, version 15: the tables of a store made now.
-- Made by scripts/schema from a store the binary made and the comments of
-- src/store/schema.c (its migrations, append-only: a store of an older version
-- is migrated when opened for writing). Do not edit: run scripts/schema.
-- (vN): the version that added the table or column. Meanings: docs/internals/store.md.

CREATE TABLE census (  -- (v8)
  run_id INTEGER NOT NULL,
  t REAL NOT NULL,
  step INTEGER,            -- the last step marked by then; NULL: none
  seq INTEGER NOT NULL,    -- the census's number in the job
  type TEXT NOT NULL,      -- '*': the census itself
  count INTEGER NOT NULL,  -- objects ('*': all it looked at)
  bytes INTEGER,           -- NULL: unknown
  holder TEXT,             -- what holds the new ones; NULL: none found
  cost_us INTEGER          -- '*': the census's time in the job
);
CREATE INDEX census_run ON census(run_id, t);

CREATE TABLE events (  -- (v1)
  run_id INTEGER NOT NULL,
  t REAL NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT
);
CREATE INDEX events_run ON events(run_id, t);

CREATE TABLE kind_samples (  -- (v9)
  run_id INTEGER NOT NULL,
  t REAL NOT NULL,
  pid INTEGER NOT NULL,
  ppid INTEGER NOT NULL,
  name TEXT NOT NULL,
  anon INTEGER NOT NULL,     -- resident anonymous; cgroup: anon
  cow INTEGER NOT NULL,      -- parent's pages copied by a forked child
  cow_base INTEGER NOT NULL, -- ... out of this many shared at first sight
  file INTEGER NOT NULL,     -- file-backed mapped (PSS); cgroup: page cache
  shmem INTEGER NOT NULL,    -- shared memory (PSS); cgroup: shmem
  gpu INTEGER NOT NULL
);
CREATE INDEX kind_samples_run ON kind_samples(run_id, t);

CREATE TABLE metrics (  -- (v1)
  run_id INTEGER NOT NULL,
  step INTEGER NOT NULL,
  t REAL NOT NULL,
  name TEXT NOT NULL,
  value REAL
);
CREATE INDEX metrics_run ON metrics(run_id, t);

CREATE TABLE placements (  -- (v10)
  run_id INTEGER PRIMARY KEY,
  slurm_job_id TEXT,
  slurm_array_job_id TEXT,
  slurm_array_task_id TEXT,
  slurm_step_id TEXT,
  alloc_mem_bytes INTEGER,    -- the allocation's memory; NULL unknown
  gpus TEXT,                  -- CUDA_VISIBLE_DEVICES or SLURM's GPU list
  launcher TEXT,              -- slurm, torchrun; NULL: a lone run
  job_key TEXT,               -- shared by the ranks of one job
  job_rank INTEGER,
  local_rank INTEGER,
  world_size INTEGER,
  node_id INTEGER
);
CREATE INDEX placements_job ON placements(job_key, job_rank);

CREATE TABLE proc_samples (  -- (v1)
  run_id INTEGER NOT NULL,
  t REAL NOT NULL,
  pid INTEGER NOT NULL,
  ppid INTEGER NOT NULL,
  name TEXT NOT NULL,
  rss INTEGER NOT NULL,
  pss INTEGER NOT NULL,
  uss INTEGER NOT NULL,
  swap INTEGER NOT NULL,
  gpu INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX proc_samples_run ON proc_samples(run_id, t);

CREATE TABLE results (  -- (v1)
  run_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, name)
);

CREATE TABLE runs (  -- (v1)
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at REAL NOT NULL,
  ended_at REAL,                              -- NULL while running
  command TEXT NOT NULL,                      -- JSON array of the argv
  cwd TEXT,
  hostname TEXT,
  measure TEXT NOT NULL,                      -- pss, rss, uss, cgroup, gpu
  interval_ns INTEGER NOT NULL DEFAULT 0,
  limit_bytes INTEGER NOT NULL DEFAULT 0,
  limit_source TEXT,
  mem_total_bytes INTEGER NOT NULL DEFAULT 0,
  cgroup_mode TEXT,
  step_regex TEXT,
  status TEXT NOT NULL DEFAULT 'running',
  exit_code INTEGER,
  exit_signal INTEGER,
  step_source TEXT NOT NULL DEFAULT 'none',
  steps INTEGER NOT NULL DEFAULT 0,
  bad_lines INTEGER NOT NULL DEFAULT 0,
  long_lines INTEGER NOT NULL DEFAULT 0,
  peak_bytes INTEGER NOT NULL DEFAULT 0,
  verdict TEXT,
  growth_bytes_per_step REAL,
  sweep_id INTEGER,                           -- (v3)
  trial_idx INTEGER,                          -- (v3)
  trial_attempt INTEGER,                      -- (v3)
  step_q0 REAL,                               -- (v3) per-step change quantiles,
  step_q1 REAL,                               -- (v3) kept at the end of the run
  step_q2 REAL,                               -- (v3) so a sweep's table needs
  step_q3 REAL,                               -- (v3) no re-analysis
  step_q4 REAL,                               -- (v3)
  steps_per_second REAL,                      -- (v3)
  trace_mean INTEGER,                         -- (v4) sampling mean, bytes; NULL: not traced
  lost TEXT,                                  -- (v5)
  supervisor_pid INTEGER,                     -- (v6) NULL: unknown
  supervisor_start INTEGER,                   -- (v6) its /proc starttime, clock ticks
  gpu_peak_bytes INTEGER,                     -- (v10)
  supervisor_pidns INTEGER,                   -- (v13) inode of its /proc/self/ns/pid
  boot_id TEXT,                               -- (v13) /proc/sys/kernel/random/boot_id
  left_pending INTEGER,                       -- (v13) 1: interrupted, its job's leftovers not yet ended
  judge_version INTEGER                       -- (v14) JUDGE_VERSION of its verdict; NULL: older
);
CREATE INDEX runs_trial ON runs(sweep_id, trial_idx, trial_attempt);

CREATE TABLE samples (  -- (v1)
  run_id INTEGER NOT NULL,
  t REAL NOT NULL,
  nprocs INTEGER NOT NULL,
  rss INTEGER NOT NULL,
  pss INTEGER NOT NULL,
  uss INTEGER NOT NULL,
  swap INTEGER NOT NULL,
  cgroup INTEGER,                       -- NULL when not measured
  gpu INTEGER,                          -- NULL when not measured
  pss_exact INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX samples_run ON samples(run_id, t);

CREATE TABLE segments (  -- (v1)
  run_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,      -- 0 for the first start
  pid INTEGER,
  started_at REAL NOT NULL,
  ended_at REAL,
  exit_code INTEGER,
  exit_signal INTEGER,
  cause TEXT,                -- why it ended: exit, signal, oom, ...
  evidence TEXT,
  end_step INTEGER,          -- (v2) last step marked; NULL: none
  memory_bytes INTEGER,      -- (v2) the measure at the end
  restart TEXT,              -- (v2) why it was restarted; NULL: it was not
  pid_start INTEGER,         -- (v12) /proc starttime of pid, ticks
  cgroup TEXT,               -- (v12) its directory; NULL: none
  also TEXT,                 -- (v12) "PID:START ...": outside its group
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE steps (  -- (v1)
  run_id INTEGER NOT NULL,
  step INTEGER NOT NULL,
  epoch INTEGER,                        -- NULL when unknown
  t REAL NOT NULL,
  nprocs INTEGER NOT NULL,
  rss INTEGER NOT NULL,
  pss INTEGER NOT NULL,
  uss INTEGER NOT NULL,
  swap INTEGER NOT NULL,
  cgroup INTEGER,
  gpu INTEGER,
  pss_exact INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX steps_run ON steps(run_id, t);

CREATE TABLE sweeps (  -- (v3)
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at REAL NOT NULL,
  ended_at REAL,
  file TEXT NOT NULL,                     -- the sweep file, as given
  spec TEXT NOT NULL,                     -- its text when the sweep began
  method TEXT NOT NULL,
  metric TEXT,                            -- NULL: none
  maximize INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'running', -- running, done, interrupted
  pid INTEGER,                            -- the sweep process while running
  optuna_storage TEXT,
  optuna_study TEXT,
  executor TEXT,                          -- (v7) NULL: local; slurm
  slurm_job INTEGER,                      -- (v7) the array job last submitted
  cwd TEXT                                -- (v13) where its trials run; NULL: unknown (older)
);

CREATE TABLE trace_live (  -- (v4)
  run_id INTEGER NOT NULL,
  t REAL NOT NULL,
  site INTEGER NOT NULL,
  step INTEGER,                  -- the last step marked by then; NULL: none
  live INTEGER NOT NULL,
  PRIMARY KEY (run_id, t, site)
);

CREATE TABLE trace_sites (  -- (v4)
  run_id INTEGER NOT NULL,
  site INTEGER NOT NULL,
  kind TEXT NOT NULL,         -- m heap, a anonymous mmap
  frames TEXT NOT NULL,       -- PATH\tVADDR\tSYMBOL per line, innermost first
  python TEXT,                -- LINE:FUNCTION:FILE, tab-separated, innermost first
  symbols TEXT,               -- FUNCTION\tFILE:LINE per frame; NULL: not yet
  live INTEGER,               -- at the end
  allocs INTEGER,             -- at the end
  frees INTEGER,              -- at the end
  PRIMARY KEY (run_id, site)
);

CREATE TABLE trial_predictions (  -- (v11)
  sweep_id INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  peak REAL,                            -- host: point, 95% lower and upper bounds
  peak_lo REAL,                         -- host: point, 95% lower and upper bounds
  peak_hi REAL,                         -- host: point, 95% lower and upper bounds
  gpu REAL,                             -- GPU, the same
  gpu_lo REAL,                          -- GPU, the same
  gpu_hi REAL,                          -- GPU, the same
  growth REAL,                          -- bytes per step
  PRIMARY KEY (sweep_id, idx, attempt)
);

CREATE TABLE trials (  -- (v3)
  sweep_id INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  attempt INTEGER NOT NULL,             -- 0; more for retries and re-runs
  params TEXT NOT NULL,                 -- JSON object
  vals TEXT NOT NULL DEFAULT '',        -- the values in the spec's order, 0x1f-separated
  env TEXT NOT NULL,                    -- JSON object
  argv TEXT NOT NULL,                   -- JSON array
  status TEXT NOT NULL,                 -- running, ok, failed, oom, interrupted, skipped
  run_id INTEGER,
  cause TEXT,
  metric REAL,
  optuna_number INTEGER,
  started_at REAL,
  ended_at REAL,
  note TEXT,
  worker TEXT,                          -- (v7) HOST:PID of the worker that claimed it
  lease_until REAL,                     -- (v7) claimed until (wall seconds); NULL: none
  slurm_job INTEGER,                    -- (v7) the worker's array job id; NULL: not SLURM
  slurm_task INTEGER,                   -- (v7) its array task id
  need_bytes INTEGER,                   -- (v15) NULL: the smallest worker's
  PRIMARY KEY (sweep_id, idx, attempt)
);
CREATE INDEX trials_status ON trials(sweep_id, status, idx);
