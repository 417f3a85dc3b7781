-- Runtimes (one per node agent) with their lease and fence, and the append-only scale ledger.
create table runtimes (
  id                text primary key,
  endpoint          text not null,
  labels            jsonb not null default '{}'::jsonb,
  slots             int not null check (slots >= 1),
  status            text not null check (status in ('READY', 'CORDONED', 'LOST')),
  lease_expires_at  timestamptz not null,
  -- bumped on every registration and when the runtime is declared LOST: an agent's heartbeats and
  -- acks carry the fence it was given, and an old fence is refused.
  fence             bigint not null,
  cordoned          boolean not null default false,
  registered_at     timestamptz not null default now(),
  last_heartbeat_at timestamptz,
  tasks             jsonb not null default '[]'::jsonb
);
create index runtimes_lease_idx on runtimes (lease_expires_at) where status <> 'LOST';

create table ledger (
  id            bigserial primary key,
  at            timestamptz not null default now(),
  kind          text not null,
  workload      text,
  tier          text,
  from_replicas int,
  to_replicas   int,
  reason        text,
  inputs        jsonb not null default '{}'::jsonb,
  plan_id       text,
  workflow_id   text,
  run_id        text,
  outcome       text,
  evidence      jsonb,
  -- activities retry: the writer passes a key (workflow id / run id / activity id), so a retried
  -- write is still one row.
  idempotency_key text unique
);
create index ledger_workload_idx on ledger (workload, id desc);
create index ledger_kind_idx on ledger (kind, id desc);
