// A database of its own on the shared PostgreSQL that the global setup started, for one test file
// (a stack, a store test, a driver test): nothing one file writes can be seen by another.
import crypto from 'node:crypto';
import { Client, type Pool } from 'pg';
import { dataPlaneDatabaseUrl, enableDataPlaneLogin } from '../store/data-plane-role';
import { testEnv } from './env';

/** Creates an empty database named `<prefix>_<random>` and answers its connection URL. */
export async function createTestDatabase(prefix = 't', adminUrl?: string): Promise<{ name: string; databaseUrl: string }> {
  const postgresAdminUrl = adminUrl ?? testEnv().postgresAdminUrl;
  const name = `${prefix}_${crypto.randomBytes(5).toString('hex')}`;
  const admin = new Client({ connectionString: postgresAdminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  return { name, databaseUrl: postgresAdminUrl.replace(/\/[^/]*$/, `/${name}`) };
}

/** The data-plane role's password on the test PostgreSQL servers: one for the run, so files side by side never change it under each other. */
const TEST_DATA_PLANE_PASSWORD = 'scalegate-test-data-plane';

/** The URL agents of a test stack connect with: the data-plane role (protocol/data-plane.ts) of `databaseUrl`'s server, whose migrations have run. */
export async function testAgentDatabaseUrl(db: Pool, databaseUrl: string): Promise<string> {
  if (!(await enableDataPlaneLogin(db, TEST_DATA_PLANE_PASSWORD))) throw new Error('the data-plane role does not exist: did migration 009 run?');
  return dataPlaneDatabaseUrl(databaseUrl, TEST_DATA_PLANE_PASSWORD);
}

/**
 * `db` with every query observed: `query` is told of each one as it is sent, `rows` of how many
 * rows each answered (before its caller sees them). The queries themselves are unchanged.
 */
export function observedPool(db: Pool, observe: { query?: () => void; rows?: (count: number) => void }): Pool {
  return new Proxy(db, {
    get(target, member, receiver) {
      if (member !== 'query') return Reflect.get(target, member, receiver);
      return (...args: unknown[]) => {
        observe.query?.();
        const result = (target.query as (...a: unknown[]) => unknown)(...args);
        if (observe.rows && result instanceof Promise) result.then((answer: { rows?: unknown[] }) => observe.rows!(answer?.rows?.length ?? 0), () => {});
        return result;
      };
    },
  });
}
