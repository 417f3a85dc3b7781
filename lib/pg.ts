// PostgreSQL plumbing every process that holds a database URL shares (the control plane's store/
// and the agents' consumer driver): bounded pools and one transaction helper. No project imports.
import { Pool, type PoolClient } from 'pg';

export interface PoolOptions {
  max?: number;
  /** how long a query may wait for a connection: a frozen or absent server fails fast */
  connectTimeoutMs?: number;
  /** client-side bound on one query's round trip (a frozen server never answers); none when unset */
  queryTimeoutMs?: number;
  /**
   * the server ends a session idle inside a transaction this long (idle_in_transaction_session_timeout):
   * a frozen client (SIGSTOP) then releases its row locks instead of holding them forever; none when unset
   */
  idleInTransactionTimeoutMs?: number;
  /** names the process in pg_stat_activity, so an operator sees who holds which connection */
  applicationName?: string;
}

export function createPool(connectionString: string, options: PoolOptions = {}): Pool {
  const pool = new Pool({
    connectionString,
    max: options.max ?? 10,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
    ...(options.queryTimeoutMs ? { query_timeout: options.queryTimeoutMs, statement_timeout: options.queryTimeoutMs } : {}),
    ...(options.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs } : {}),
    ...(options.applicationName ? { application_name: options.applicationName } : {}),
  });
  // An idle client losing its server (e.g. PostgreSQL restarting) must not crash the process.
  pool.on('error', () => {});
  return pool;
}

/**
 * Runs `work` in one transaction on a dedicated connection; rolls back on any error and rethrows it.
 * A connection that cannot even roll back, or whose session the server ended meanwhile, is discarded
 * rather than returned to the pool.
 */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // The server ending the session while no query is in flight (idle_in_transaction_session_timeout,
  // a restart) reaches the client as an event: without a listener it would be an uncaught exception.
  const onClientError = (error: Error) => {
    broken = error;
  };
  client.on('error', onClientError);
  try {
    await client.query('begin');
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.off('error', onClientError);
    client.release(broken);
  }
}

/**
 * Runs `work` in one REPEATABLE READ, read-only transaction: every query it makes sees the same
 * snapshot, so tables that others write meanwhile are read as of one instant (audits).
 */
export async function inReadOnlySnapshot<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('begin isolation level repeatable read read only');
    return await work(client);
  } finally {
    // Nothing to keep: roll back; a connection that cannot is discarded rather than pooled.
    await client.query('rollback').catch((error: Error) => {
      broken = error;
    });
    client.release(broken);
  }
}
