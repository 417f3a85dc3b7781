-- The lease sweeper as a durable workflow and runtime recovery (DESIGN.md §3 "Static stability", §4.4).
--
-- When each part of the control plane last showed it was alive: the API records itself every
-- leaseTtl/3 (with the lease it hands out), the lease sweeper at each pass. `resumed_at` is the end
-- of the component's last gap (a write that came later than its outage threshold after the one
-- before, or its first write): the sweeper declares nothing LOST until one lease has passed since
-- the API or itself came back, so a control-plane outage is never mistaken for the fleet's.
create table control_plane_liveness (
  component    text primary key,
  at           timestamptz not null,
  resumed_at   timestamptz not null,
  -- the API's lease (SCALEGATE_LEASE_TTL_MS): the sweeper judges leases by what the agents were told
  lease_ttl_ms bigint
);

-- When the runtime was last declared LOST (by the lease sweeper or a recovery).
alter table runtimes add column lost_at timestamptz;
-- Set when the runtime's lease ran out in a mass expiry (more than half of its zone at once): such
-- runtimes are neither declared LOST nor recovered automatically; a heartbeat clears it.
alter table runtimes add column held_at timestamptz;

-- Events are read by type (runtime.lost, mass-expiry, ...) and in order.
create index events_type_idx on events (type, id);
