// The data plane's PostgreSQL role (docs/security.md, "The agents' database role"). Agents connect
// as it, and it reaches only the tables the data contracts name: sources, sinks, the consumer's
// offsets and ownership log, the stream jobs' state. The control plane's tables (runtimes and their
// credentials, placements and fences, plans, the ledger) grant it nothing, so whoever takes a node
// cannot rewrite where work runs. The role is created by migration 009.

export const DATA_PLANE_ROLE = 'scalegate_agent';

/**
 * A statement granting the data-plane role the rows of `tables` (quoted identifiers) and the use
 * of `sequences`, run right after their `create table if not exists`: whoever created a table (an
 * agent, a producer, the control plane's feed) makes it reachable to every agent. A no-op where
 * the role does not exist; by someone who does not own a table, a warning, not an error.
 */
export function dataPlaneGrants(tables: readonly string[], sequences: readonly string[] = []): string {
  const grants = [
    `grant select, insert, update, delete on table ${tables.join(', ')} to ${DATA_PLANE_ROLE};`,
    ...(sequences.length ? [`grant usage on sequence ${sequences.join(', ')} to ${DATA_PLANE_ROLE};`] : []),
  ];
  return `do $$ begin if exists (select from pg_roles where rolname = '${DATA_PLANE_ROLE}') then ${grants.join(' ')} end if; end $$`;
}
