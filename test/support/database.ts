// A database of its own on the shared PostgreSQL that the global setup started, for one test file
// (a stack, a store test, a driver test): nothing one file writes can be seen by another.
import crypto from 'node:crypto';
import { Client } from 'pg';
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
