// Numbered SQL migrations (store/migrations/NNN_name.sql), each applied in its own transaction and
// recorded in schema_migrations. A session-level advisory lock serialises processes that start at
// once: the second waits, then finds the work done.
import fs from 'node:fs';
import path from 'node:path';
import type { Pool } from 'pg';

const MIGRATIONS_DIR = path.join(__dirname, 'migrations');
const LOCK_KEY = 727_274_001; // arbitrary, fixed: "scalegate migrations"

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 3)), name: f.slice(4, -4), sql: fs.readFileSync(path.join(dir, f), 'utf8') }));
}

/** Applies pending migrations; returns the versions this call applied. */
export async function migrate(pool: Pool, migrations = loadMigrations()): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('select pg_advisory_lock($1)', [LOCK_KEY]);
    await client.query(
      `create table if not exists schema_migrations (
         version int primary key, name text not null, applied_at timestamptz not null default now())`,
    );
    const done = new Set((await client.query<{ version: number }>('select version from schema_migrations')).rows.map((r) => r.version));
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      try {
        await client.query('begin');
        await client.query(migration.sql);
        await client.query('insert into schema_migrations (version, name) values ($1, $2)', [migration.version, migration.name]);
        await client.query('commit');
        applied.push(migration.version);
      } catch (error) {
        await client.query('rollback');
        throw new Error(`migration ${migration.version}_${migration.name} failed: ${(error as Error).message}`);
      }
    }
  } finally {
    await client.query('select pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
    client.release();
  }
  return applied;
}
