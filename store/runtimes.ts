// Runtime registry: registration (with the runtime's own credential), leases, fences. Every statement is
// parameterised.
import crypto from 'node:crypto';
import type { Pool } from 'pg';
import { RUNTIME_CREDENTIAL_BYTES, type RegisterRuntime, type Runtime, type TaskReport } from '../protocol';

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

/** The agent token may not register a live runtime again (only its own credential resumes it). */
export class RuntimeLiveError extends Error {
  readonly code = 'runtime-live';
  constructor(readonly runtimeId: string) {
    super(
      `runtime ${runtimeId} is live (its lease runs): the agent token cannot register it again; ` +
        `present the runtime's own credential (Authorization: Bearer <credential>) to resume it`,
    );
  }
}

/** A new runtime credential: RUNTIME_CREDENTIAL_BYTES random bytes, base64url. */
export function newRuntimeCredential(): string {
  return crypto.randomBytes(RUNTIME_CREDENTIAL_BYTES).toString('base64url');
}

/**
 * The columns every runtime query answers. Never the credential: what these rows become reaches
 * /v1/state, the routes' answers and logs. Only credentialOf and agentTarget read it.
 */
const COLUMNS = 'id, endpoint, labels, slots, status, lease_expires_at, fence, tasks, last_heartbeat_at';

/** A live runtime: READY or CORDONED with its lease unexpired. The agent token may not register it again. */
const LIVE = `status <> 'LOST' and lease_expires_at > now()`;

/** Why a resume with a runtime's credential was refused. */
export type ResumeRefusal = 'unknown-credential' | 'expired';

/** How the control plane reaches one agent: its endpoint and the credential to present there. */
export interface AgentTarget {
  runtimeId: string;
  endpoint: string;
  status: Runtime['status'];
  /** null only for a runtime registered before credentials existed (it registers again soon) */
  credential: string | null;
}

export function createRuntimeStore(db: Pool) {
  return {
    /**
     * Registers with the agent token: a new runtime, or one whose lease lapsed or that was declared
     * LOST (DESIGN.md §3 "Credentials"). READY (a cordon survives), a fresh lease, a new fence and
     * the new `credential` (the caller hands it to the agent, once). Throws RuntimeLiveError,
     * changing nothing, when the runtime is live: the agent token may not take over a live runtime.
     * One statement, so two registrations cannot both win.
     */
    async register(input: RegisterRuntime, leaseTtlMs: number, credential: string = newRuntimeCredential()) {
      const { rows } = await db.query<RuntimeRow>(
        `insert into runtimes (id, endpoint, labels, slots, status, lease_expires_at, fence, last_heartbeat_at, credential)
         values ($1, $2, $3, $4, 'READY', now() + ($5::bigint * interval '1 millisecond'), 1, now(), $6)
         on conflict (id) do update set
           endpoint = excluded.endpoint, labels = excluded.labels, slots = excluded.slots,
           status = case when runtimes.cordoned then 'CORDONED' else 'READY' end,
           lease_expires_at = excluded.lease_expires_at, fence = runtimes.fence + 1,
           last_heartbeat_at = now(), registered_at = now(), credential = excluded.credential
         where runtimes.status = 'LOST' or runtimes.lease_expires_at <= now() or runtimes.credential is null
         returning ${COLUMNS}`,
        [input.id, input.endpoint, JSON.stringify(input.labels), input.slots, leaseTtlMs, credential],
      );
      if (!rows[0]) throw new RuntimeLiveError(input.id);
      return toRuntime(rows[0]);
    },

    /**
     * Re-registration of a live runtime with its own credential: the lease renewed, endpoint,
     * labels and slots updated; the same fence, status and credential, so nothing it runs is
     * revoked. Refused when the credential is not the runtime's (any more) or its lease lapsed.
     */
    async resume(input: RegisterRuntime, credential: string, leaseTtlMs: number) {
      const { rows } = await db.query<RuntimeRow>(
        `update runtimes set endpoint = $2, labels = $3, slots = $4,
                lease_expires_at = now() + ($5::bigint * interval '1 millisecond'), last_heartbeat_at = now()
          where id = $1 and credential = $6 and ${LIVE}
          returning ${COLUMNS}`,
        [input.id, input.endpoint, JSON.stringify(input.labels), input.slots, leaseTtlMs, credential],
      );
      if (rows[0]) return { runtime: toRuntime(rows[0]), refused: null };
      const { rows: found } = await db.query<{ same: boolean }>('select credential = $2 as same from runtimes where id = $1', [input.id, credential]);
      const refused: ResumeRefusal = found[0]?.same ? 'expired' : 'unknown-credential';
      return { runtime: null, refused };
    },

    /** The credential runtime `id` presents now (null: unknown runtime, or none yet). Never log it. */
    async credentialOf(id: string): Promise<string | null> {
      const { rows } = await db.query<{ credential: string | null }>('select credential from runtimes where id = $1', [id]);
      return rows[0]?.credential ?? null;
    },

    /** Where the control plane reaches runtime `id` and what it presents there; null when unknown. */
    async agentTarget(id: string): Promise<AgentTarget | null> {
      const { rows } = await db.query<{ id: string; endpoint: string; status: Runtime['status']; credential: string | null }>(
        'select id, endpoint, status, credential from runtimes where id = $1',
        [id],
      );
      const row = rows[0];
      return row ? { runtimeId: row.id, endpoint: row.endpoint, status: row.status, credential: row.credential } : null;
    },

    /** Renews the lease if the fence is current and the runtime is not LOST. */
    async heartbeat(id: string, fence: number, tasks: TaskReport[], leaseTtlMs: number) {
      const { rows } = await db.query<RuntimeRow>(
        `update runtimes set lease_expires_at = now() + ($3::bigint * interval '1 millisecond'),
                last_heartbeat_at = now(), tasks = $4
          where id = $1 and fence = $2 and ${LIVE}
          returning ${COLUMNS}`,
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
          where id = $1 returning ${COLUMNS}`,
        [id, cordoned],
      );
      return rows[0] ? toRuntime(rows[0]) : null;
    },

    async get(id: string) {
      const { rows } = await db.query<RuntimeRow>(`select ${COLUMNS} from runtimes where id = $1`, [id]);
      return rows[0] ? toRuntime(rows[0]) : null;
    },

    async list() {
      const { rows } = await db.query<RuntimeRow>(`select ${COLUMNS} from runtimes order by id`);
      return rows.map(toRuntime);
    },
  };
}
export type RuntimeStore = ReturnType<typeof createRuntimeStore>;
