import { Pool, PoolClient } from 'pg';

export type Db = Pool;

export function createPool(connectionString: string, max = 10): Pool {
  const pool = new Pool({ connectionString, max, idleTimeoutMillis: 10_000 });
  // An idle client losing its server (e.g. PostgreSQL restarting) must not crash the process.
  pool.on('error', () => {});
  return pool;
}

/** Runs `work` in one transaction on a dedicated connection; rolls back on any error and rethrows it. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('begin');
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (error) {
    // A connection that cannot even roll back is discarded rather than returned to the pool.
    await client.query('rollback').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
