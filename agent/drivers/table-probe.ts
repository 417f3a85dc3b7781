// The scale-out connectivity gate for drivers over PostgreSQL tables (consumer, stream): can this
// runtime read a source table or write a sink table, or create it when it is missing?
import { Client } from 'pg';
import type { ProbeResult } from '../../protocol';
import { quoteIdentifier } from '../../protocol/consumer-tables';
import type { DriverContext } from './driver';
import { messageOf } from '../../lib/errors';

export async function probeTable(ctx: DriverContext, table: string, role: 'source' | 'destination'): Promise<ProbeResult> {
  if (!ctx.databaseUrl) return { ok: false, detail: `runtime ${ctx.runtimeId} has no database URL` };
  const privilege = role === 'source' ? 'SELECT' : 'INSERT';
  let client: Client | null = null;
  try {
    client = new Client({ connectionString: ctx.databaseUrl, connectionTimeoutMillis: 5_000 });
    client.on('error', () => {});
    await client.connect();
    const { rows } = await client.query<{ exists: boolean; allowed: boolean | null; can_create: boolean }>(
      `select to_regclass($1) is not null as exists,
              case when to_regclass($1) is null then null else has_table_privilege(to_regclass($1), $2) end as allowed,
              has_schema_privilege(current_schema(), 'CREATE') as can_create`,
      [quoteIdentifier(table), privilege],
    );
    const { exists, allowed, can_create } = rows[0];
    if (exists) {
      return allowed
        ? { ok: true, detail: `${role} table ${table} exists and is readable as needed (${privilege})` }
        : { ok: false, detail: `${role} table ${table} exists but this role lacks ${privilege} on it` };
    }
    return can_create
      ? { ok: true, detail: `${role} table ${table} does not exist yet; it can be created` }
      : { ok: false, detail: `${role} table ${table} does not exist and this role cannot create it` };
  } catch (error) {
    return { ok: false, detail: `cannot reach PostgreSQL for ${role} ${table}: ${messageOf(error)}` };
  } finally {
    await client?.end().catch(() => {});
  }
}
