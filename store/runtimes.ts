// Runtime registry: registration, leases, fences. Every statement is parameterised.
import type { Pool } from 'pg';
import type { RegisterRuntime, TaskReport } from '../protocol';
import type { Runtime } from '../protocol';

interface RuntimeRow {
  id: string;
  endpoint: string;
  labels: Record<string, string>;
  slots: number;
  status: Runtime['status'];
  lease_expires_at: Date;
  fence: string;
  tasks: TaskReport[];
  last_heartbeat_at: Date | null;
}

const toRuntime = (row: RuntimeRow): Runtime & { tasks: TaskReport[]; lastHeartbeatAt: string | null } => ({
  id: row.id,
  endpoint: row.endpoint,
  labels: row.labels,
  slots: row.slots,
  status: row.status,
  leaseExpiresAt: row.lease_expires_at.toISOString(),
  fence: Number(row.fence),
  tasks: row.tasks,
  lastHeartbeatAt: row.last_heartbeat_at?.toISOString() ?? null,
});

export class StaleFenceError extends Error {
  readonly code = 'stale-fence';
  constructor(
    readonly runtimeId: string,
    readonly presented: number,
    readonly current: number | null,
  ) {
    super(
      current === null
        ? `runtime ${runtimeId} is not registered`
        : `runtime ${runtimeId}: fence ${presented} is stale (current ${current}); register again`,
    );
  }
}

export function createRuntimeStore(db: Pool) {
  return {
    /** (Re)registers a runtime: READY, a fresh lease and a new fence. A cordon survives re-registration. */
    async register(input: RegisterRuntime, leaseTtlMs: number) {
      const { rows } = await db.query<RuntimeRow>(
        `insert into runtimes (id, endpoint, labels, slots, status, lease_expires_at, fence, last_heartbeat_at)
         values ($1, $2, $3, $4, 'READY', now() + ($5::bigint * interval '1 millisecond'), 1, now())
         on conflict (id) do update set
           endpoint = excluded.endpoint, labels = excluded.labels, slots = excluded.slots,
           status = case when runtimes.cordoned then 'CORDONED' else 'READY' end,
           lease_expires_at = excluded.lease_expires_at, fence = runtimes.fence + 1,
           last_heartbeat_at = now(), registered_at = now()
         returning *`,
        [input.id, input.endpoint, JSON.stringify(input.labels), input.slots, leaseTtlMs],
      );
      return toRuntime(rows[0]);
    },

    /** Renews the lease if the fence is current and the runtime is not LOST. */
    async heartbeat(id: string, fence: number, tasks: TaskReport[], leaseTtlMs: number) {
      const { rows } = await db.query<RuntimeRow>(
        `update runtimes set lease_expires_at = now() + ($3::bigint * interval '1 millisecond'),
                last_heartbeat_at = now(), tasks = $4
          where id = $1 and fence = $2 and status <> 'LOST' and lease_expires_at > now()
          returning *`,
        [id, fence, leaseTtlMs, JSON.stringify(tasks)],
      );
      if (rows[0]) return toRuntime(rows[0]);
      const current = await db.query<{ fence: string }>('select fence from runtimes where id = $1', [id]);
      throw new StaleFenceError(id, fence, current.rows[0] ? Number(current.rows[0].fence) : null);
    },

    /**
     * Declares every runtime whose lease ran out LOST and bumps its fence, so the old incarnation's
     * writes are refused. Returns the ids newly declared LOST (recovery starts from them).
     */
    async sweepExpired(): Promise<string[]> {
      const { rows } = await db.query<{ id: string }>(
        `update runtimes set status = 'LOST', fence = fence + 1
          where status <> 'LOST' and lease_expires_at <= now()
          returning id`,
      );
      return rows.map((r) => r.id);
    },

    async setCordoned(id: string, cordoned: boolean) {
      const { rows } = await db.query<RuntimeRow>(
        `update runtimes set cordoned = $2,
                status = case when status = 'LOST' then status when $2 then 'CORDONED' else 'READY' end
          where id = $1 returning *`,
        [id, cordoned],
      );
      return rows[0] ? toRuntime(rows[0]) : null;
    },

    async get(id: string) {
      const { rows } = await db.query<RuntimeRow>('select * from runtimes where id = $1', [id]);
      return rows[0] ? toRuntime(rows[0]) : null;
    },

    async list() {
      const { rows } = await db.query<RuntimeRow>('select * from runtimes order by id');
      return rows.map(toRuntime);
    },
  };
}
export type RuntimeStore = ReturnType<typeof createRuntimeStore>;
