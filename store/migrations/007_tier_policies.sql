-- Autoscaler policies, one per tier (DESIGN.md §6), with a revision bumped on every PUT: the
-- autoscale:<tier> workflow keeps the highest revision it was signalled, so racing updates converge.
create table tier_policies (
  tier       text primary key,
  revision   bigint not null,
  policy     jsonb not null,
  updated_at timestamptz not null default now()
);
-- GET /v1/tiers/:tier falls back to the newest autoscale rows of a tier when its workflow is not running.
create index ledger_tier_idx on ledger (tier, id desc) where tier is not null;
