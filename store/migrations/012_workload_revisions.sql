-- Versions and rollouts (issue 34 item 3, DESIGN.md §3): every spec a service or consumer has run,
-- by its revision (lib/revision.ts, a digest of the spec), so a rollout can roll a replaced replica
-- back to the spec it ran. Placement assignments record the revision each replica runs (`revision`).
create table workload_revisions (
  workload   text not null references workloads (name) on delete cascade,
  revision   text not null,
  spec       jsonb not null,
  created_at timestamptz not null default now(),
  primary key (workload, revision)
);
