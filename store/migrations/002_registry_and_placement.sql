-- Workload registry, fenced placement records, plans, unplaced work and the reconcile marker.
create sequence registry_revision;

create table workloads (
  name        text primary key,
  kind        text not null check (kind in ('service', 'consumer', 'stream')),
  definition  jsonb not null,
  -- the registry revision at this workload's last change; max(revision) is the registry's revision
  revision    bigint not null default nextval('registry_revision'),
  retired     boolean not null default false,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);

-- One record per workload. A missing record is pending, never an implicit assignment. Writes are
-- compare-and-set on `fence`: a stale coordinator cannot overwrite a newer decision.
create table placements (
  workload    text primary key references workloads (name) on delete cascade,
  fence       bigint not null,
  generation  int not null default 1,
  assignments jsonb not null,
  updated_at  timestamptz not null default now(),
  updated_by  text
);

create table unplaced (
  workload  text primary key references workloads (name) on delete cascade,
  reason    text not null,
  missing   int not null,
  detail    text,
  at        timestamptz not null default now()
);

create table plans (
  id               text primary key,
  workload         text not null references workloads (name) on delete cascade,
  replicas         jsonb not null,
  basis_revision   bigint not null,
  basis_fence      bigint not null,
  body             jsonb not null,
  created_at       timestamptz not null default now(),
  applied_workflow text
);

-- Observable events (placement.pending, runtime.lost, ...), newest last.
create table events (
  id      bigserial primary key,
  at      timestamptz not null default now(),
  type    text not null,
  subject text not null,
  detail  jsonb not null default '{}'::jsonb
);

create table reconcile_state (
  id         int primary key check (id = 1),
  inputs_key text,
  at         timestamptz,
  skipped    boolean,
  passes     bigint not null default 0,
  skips      bigint not null default 0
);
insert into reconcile_state (id) values (1);
