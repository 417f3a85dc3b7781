// The agents' database role reaches data-plane tables only (issue 21 item 9). Its grants are
// written in two places that must agree with the migrations: CONTROL_PLANE_TABLES (which workload
// names are refused) and migration 009's exclusion list (which existing tables it is granted).
import fs from 'node:fs';
import path from 'node:path';
import { consumerTablesDdl } from '../../protocol/consumer-tables';
import { DATA_PLANE_ROLE, dataPlaneGrants } from '../../protocol/data-plane';
import { streamTablesDdl } from '../../protocol/stream-tables';
import { CONTROL_PLANE_TABLES } from '../../protocol/workload';
import { loadMigrations } from '../../store/migrate';

const migrations = loadMigrations();
const createdByMigrations = migrations.flatMap((m) => [...m.sql.matchAll(/create table (?:if not exists )?([a-z_]+)/gi)].map((match) => match[1]));

describe('the control-plane tables', () => {
  it('are every table the migrations create, and schema_migrations', () => {
    expect([...CONTROL_PLANE_TABLES].sort()).toEqual([...createdByMigrations, 'schema_migrations'].sort());
  });

  it('are what migration 009 leaves out when it grants the data-plane role the tables already there (later ones it is never granted)', () => {
    const sql = fs.readFileSync(path.join(__dirname, '../../store/migrations/009_data_plane_role.sql'), 'utf8');
    const excluded = /tablename not in \(([^)]*)\)/.exec(sql)![1].match(/'([a-z_]+)'/g)!.map((quoted) => quoted.slice(1, -1));
    const createdAfter = migrations.filter((m) => m.version > 9).flatMap((m) => [...m.sql.matchAll(/create table (?:if not exists )?([a-z_]+)/gi)].map((match) => match[1]));
    expect(excluded.sort()).toEqual(CONTROL_PLANE_TABLES.filter((table) => !createdAfter.includes(table)).sort());
  });
});

describe('data-plane DDL', () => {
  it('grants the role every table (and the sequence) it creates, and nothing else', () => {
    const grant = (ddl: string[]) => ddl[ddl.length - 1];
    expect(grant(consumerTablesDdl('orders_in', 'orders_out'))).toBe(dataPlaneGrants(
      ['"orders_in"', '"orders_out"', 'scalegate_consumer_offsets', 'scalegate_consumer_ownership_log'], ['scalegate_consumer_ownership_log_id_seq']));
    expect(grant(consumerTablesDdl(null, 'orders_out'))).toContain('on table "orders_out", scalegate_consumer_offsets, scalegate_consumer_ownership_log to');
    const created = (ddl: string[]) => ddl.flatMap((statement) => [...statement.matchAll(/create table if not exists ("?[a-z_]+"?)/g)].map((m) => m[1]));
    for (const ddl of [consumerTablesDdl('a_in', 'a_out'), consumerTablesDdl(null, 'a_out'), streamTablesDdl('s_in', 's_out'), streamTablesDdl(null, 's_out')]) {
      const granted = /on table (.*?) to/.exec(grant(ddl))![1].split(', ');
      expect(granted.sort()).toEqual(created(ddl).sort());
      expect(granted.some((table) => (CONTROL_PLANE_TABLES as readonly string[]).includes(table.replace(/"/g, '')))).toBe(false);
    }
  });

  it('is a no-op where the role does not exist', () => {
    expect(dataPlaneGrants(['t'])).toMatch(new RegExp(`^do \\$\\$ begin if exists \\(select from pg_roles where rolname = '${DATA_PLANE_ROLE}'\\) then .* end if; end \\$\\$$`));
  });
});
