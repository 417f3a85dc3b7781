-- The agents' own role (docs/security.md, "The agents' database role"; protocol/data-plane.ts):
-- it reaches the data-plane tables only. Each data-plane table's DDL grants it that table's rows
-- (protocol/consumer-tables.ts, stream-tables.ts); the control plane's tables grant it nothing.
-- Created NOLOGIN: whoever runs the agents gives it a password and LOGIN (npm start does,
-- SCALEGATE_AGENT_DATABASE_PASSWORD on the API does). Where the migrating user may not create
-- roles, a DBA creates it by hand, as docs/security.md shows, and this migration changes nothing.
do $$
begin
  if not exists (select from pg_roles where rolname = 'scalegate_agent') then
    begin
      create role scalegate_agent nologin;
    exception
      -- another database of this cluster created it meanwhile (roles are cluster-wide)
      when duplicate_object or unique_violation then null;
      when insufficient_privilege then
        raise notice 'role scalegate_agent not created: % may not create roles (docs/security.md)', current_user;
    end;
  end if;
  if exists (select from pg_roles where rolname = 'scalegate_agent') then
    begin
      execute format('grant connect on database %I to scalegate_agent', current_database());
      -- it creates the tables of the contracts it runs (sources, sinks, bookkeeping) if missing
      grant usage, create on schema public to scalegate_agent;
    exception when insufficient_privilege then
      raise notice 'scalegate_agent not granted schema public: % may not grant it (docs/security.md)', current_user;
    end;
  end if;
end $$;

-- Data-plane tables made before this migration (agents used the control plane's role then): every
-- table of schema public except the control plane's own.
do $$
declare
  data_table record;
begin
  if not exists (select from pg_roles where rolname = 'scalegate_agent') then return; end if;
  for data_table in
    select tablename from pg_tables
     where schemaname = 'public'
       and tablename not in ('schema_migrations', 'runtimes', 'ledger', 'workloads', 'placements', 'unplaced', 'plans',
                             'events', 'reconcile_state', 'control_plane_liveness', 'tier_policies', 'operation_starts')
  loop
    execute format('grant select, insert, update, delete on table public.%I to scalegate_agent', data_table.tablename);
  end loop;
  if exists (select from pg_class where relname = 'scalegate_consumer_ownership_log_id_seq' and relkind = 'S') then
    grant usage on sequence scalegate_consumer_ownership_log_id_seq to scalegate_agent;
  end if;
end $$;
