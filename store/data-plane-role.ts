// The agents' database credentials (protocol/data-plane.ts): the data-plane role, given LOGIN and a
// password by whoever starts the agents, and the URL the agents connect with. The control plane
// keeps its own URL; the agents never see it.
import crypto from 'node:crypto';
import type { Pool } from 'pg';
import { DATA_PLANE_ROLE } from '../protocol/data-plane';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Lets the data-plane role log in with `password` (ALTER ROLE: the caller's role may create roles).
 * False when the role does not exist (a database whose migrating user could not create it). Two
 * processes altering the role at once (API replicas starting together) can fail with "tuple
 * concurrently updated": retried.
 */
export async function enableDataPlaneLogin(pool: Pool, password: string): Promise<boolean> {
  const { rows } = await pool.query<{ statement: string | null }>(
    `select case when exists (select from pg_roles where rolname = $1) then format('alter role %I with login password %L', $1::text, $2::text) end as statement`,
    [DATA_PLANE_ROLE, password],
  );
  const statement = rows[0].statement;
  if (!statement) return false;
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query(statement);
      return true;
    } catch (error) {
      if (attempt >= 5 || !/concurrently/.test((error as Error).message)) throw error;
      await sleep(50 * attempt);
    }
  }
}

/** `databaseUrl` with the data-plane role's user and password: the same server and database. */
export function dataPlaneDatabaseUrl(databaseUrl: string, password: string): string {
  const url = new URL(databaseUrl);
  url.username = DATA_PLANE_ROLE;
  url.password = password; // the URL setter percent-encodes it
  return url.toString();
}

/**
 * The URL agents connect with: the data-plane role's, under a new password; or, where the role
 * cannot log in (it does not exist, or this user may not alter it), the control plane's, saying why.
 */
export async function newAgentDatabaseUrl(pool: Pool, databaseUrl: string, warn: (why: string) => void): Promise<string> {
  const password = crypto.randomBytes(18).toString('hex');
  try {
    if (await enableDataPlaneLogin(pool, password)) return dataPlaneDatabaseUrl(databaseUrl, password);
    warn(`role ${DATA_PLANE_ROLE} does not exist`);
  } catch (error) {
    warn(`role ${DATA_PLANE_ROLE} cannot log in: ${(error as Error).message}`);
  }
  return databaseUrl;
}
