// Runtime registry: registration (with the runtime's own credential), leases, fences, the declaration
// of LOST (by the lease sweeper or a recovery), mass-expiry holds, and the control plane's own
// liveness (DESIGN.md §3 "Static stability"). Every statement is parameterised.
import crypto from 'node:crypto';
import type { Pool } from 'pg';
import { inTransaction } from './db';
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
  lost_at: Date | null;
  held_at: Date | null;
}

/** A runtime as the store answers it: the protocol's fields plus what the control plane keeps about it. */
export type StoredRuntime = Runtime & {
  tasks: TaskReport[];
  lastHeartbeatAt: string | null;
  /** when it was last declared LOST */
  lostAt: string | null;
  /** set while a mass expiry holds it (not declared LOST, not recovered automatically) */
  heldAt: string | null;
};

/**
 * A runtime's protocol fields: what placement and the gates read of every runtime. Cheap to parse,
 * since every scale operation reads them for the whole fleet twice: the lease's end comes as the
 * text toISOString() would make of it (milliseconds, truncated as pg's own parser truncates) rather
 * than as a Date parsed and formatted again, and the labels as their text, parsed once per distinct
 * set (bench/fleet at 1,000 runtimes: 1.7 ms of the worker's CPU a read instead of 2.9).
 */
const FLEET_COLUMNS = `id, endpoint, labels::text as labels, slots, status, fence,
  to_char(lease_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as lease_expires_at`;
type FleetRow = Pick<RuntimeRow, 'id' | 'endpoint' | 'slots' | 'status' | 'fence'> & { labels: string; lease_expires_at: string };

const protocolFields = (row: Pick<RuntimeRow, 'id' | 'endpoint' | 'slots' | 'status' | 'fence'>, labels: Runtime['labels'], leaseExpiresAt: string): Runtime => ({
  id: row.id,
  endpoint: row.endpoint,
  labels,
  slots: row.slots,
  status: row.status,
  leaseExpiresAt,
  fence: Number(row.fence),
});

const toRuntime = (row: RuntimeRow): StoredRuntime => ({
  ...protocolFields(row, row.labels, row.lease_expires_at.toISOString()),
  tasks: row.tasks,
  lastHeartbeatAt: row.last_heartbeat_at?.toISOString() ?? null,
  lostAt: row.lost_at?.toISOString() ?? null,
  heldAt: row.held_at?.toISOString() ?? null,
});

export class StaleFenceError extends Error {
  readonly code = 'stale-fence';
  constructor(
    readonly runtimeId: string,
    readonly presented: number,
    readonly current: number | null,
    /** the runtime's status now (null: not registered) */
    readonly status: Runtime['status'] | null = null,
    /** the task ids placements assign to the runtime now */
    readonly placedTaskIds: string[] = [],
  ) {
    super(
      current === null
        ? `runtime ${runtimeId} is not registered`
        : status === 'LOST'
          ? `runtime ${runtimeId} was declared LOST (fence ${presented} is stale, current ${current}); register again`
          : `runtime ${runtimeId}: fence ${presented} is stale (current ${current}); register again`,
    );
  }
}

/** A renewed lease, and the task ids placements assign to the runtime. */
export interface HeartbeatRenewal {
  leaseExpiresAt: string;
  fence: number;
  status: Runtime['status'];
  placedTaskIds: string[];
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
const COLUMNS = 'id, endpoint, labels, slots, status, lease_expires_at, fence, tasks, last_heartbeat_at, lost_at, held_at';

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

/**
 * What a recovery's declaration found: it declared the runtime LOST now, it was LOST already, it
 * came back (registered again since the sweeper declared it), or there is no such runtime.
 */
export type DeclareLostOutcome =
  | { outcome: 'declared' | 'already-lost' | 'came-back'; runtime: StoredRuntime }
  | { outcome: 'unknown'; runtime: null };

/** One runtime as the lease sweeper sees it (times in ms on the database's clock). */
export interface SweepRuntime {
  id: string;
  labels: Record<string, string>;
  status: Runtime['status'];
  fence: number;
  leaseExpiresAtMs: number;
  /** held by an earlier mass expiry */
  held: boolean;
}

/** A component's liveness on the database's clock: this write, the end of its last gap, the write before. */
export interface Liveness {
  atMs: number;
  resumedAtMs: number;
  previousAtMs: number | null;
}

export interface SweepView {
  nowMs: number;
  /** the lease the API hands out (null: no API has recorded its liveness yet) */
  leaseTtlMs: number | null;
  api: { atMs: number; resumedAtMs: number } | null;
  sweeper: Liveness;
  /** every runtime not LOST */
  runtimes: SweepRuntime[];
}

/**
 * A heartbeat's one statement ($1 id, $2 fence, $3 lease in ms, $4 task reports): the renewal, the
 * fence and status it was judged against, and the task ids placements assign to the runtime (found
 * through placements_assignments_idx, so its cost does not grow with the number of workloads).
 * A renewal whose reports say a task is crash-looping that the runtime's previous reports did not
 * records a `task.crash-looping` event (DESIGN.md §3 "Supervision": the control plane is told; the
 * workflow handleCrashLoops, which the heartbeat route signals, decides and records its decision).
 */
export const HEARTBEAT_STATEMENT = `
  with previous as (select tasks from runtimes where id = $1),
  renewed as (
    update runtimes set lease_expires_at = now() + ($3::bigint * interval '1 millisecond'),
           last_heartbeat_at = now(), tasks = $4, held_at = null
     where id = $1 and fence = $2 and status <> 'LOST'
     returning lease_expires_at, fence, status),
  crash_looping as (
    insert into events (type, subject, detail)
    select 'task.crash-looping', t->>'taskId',
           jsonb_build_object('runtimeId', $1::text, 'workload', t->>'workload', 'restarts', coalesce(t->'counts'->'restarts', '0'::jsonb),
                              'lastExit', t->'lastExit', 'nextRestartAt', t->'nextRestartAt', 'decidedBy', 'crash-loops:' || (t->>'workload'))
      from jsonb_array_elements($4::jsonb) t
     where t->>'crashLooping' = 'true' and exists (select 1 from renewed)
       and not exists (select 1 from previous p, jsonb_array_elements(p.tasks) o
                        where o->>'taskId' = t->>'taskId' and o->>'crashLooping' = 'true'))
  select renewed.lease_expires_at, renewed.fence as renewed_fence, renewed.status as renewed_status,
         r.fence as current_fence, r.status as current_status,
         array(select a->>'taskId' from placements p, jsonb_array_elements(p.assignments) a
                where p.assignments @> jsonb_build_array(jsonb_build_object('runtimeId', $1::text)) and a->>'runtimeId' = $1) as placed
    from (select 1) as one left join renewed on true left join runtimes r on r.id = $1`;

export function createRuntimeStore(db: Pool) {
  /**
   * Records that `component` is alive now (the API every leaseTtl/3, the lease sweeper at each
   * pass). A write more than `gapMs` after the previous one, or the first, ends a gap: its
   * `resumedAt` is now. The API also records the lease it hands out.
   */
  async function recordLiveness(component: string, gapMs: number, leaseTtlMs: number | null = null): Promise<Liveness> {
    const { rows } = await db.query<{ at: Date; resumed_at: Date; previous_at: Date | null }>(
      `with previous as (select at from control_plane_liveness where component = $1)
       insert into control_plane_liveness (component, at, resumed_at, lease_ttl_ms) values ($1, now(), now(), $3)
       on conflict (component) do update set
         resumed_at = case when control_plane_liveness.at < now() - ($2::bigint * interval '1 millisecond') then now()
                           else control_plane_liveness.resumed_at end,
         at = greatest(now(), control_plane_liveness.at),
         lease_ttl_ms = coalesce($3, control_plane_liveness.lease_ttl_ms)
       returning at, resumed_at, (select at from previous) as previous_at`,
      [component, gapMs, leaseTtlMs],
    );
    const row = rows[0];
    return { atMs: row.at.getTime(), resumedAtMs: row.resumed_at.getTime(), previousAtMs: row.previous_at?.getTime() ?? null };
  }

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
           last_heartbeat_at = now(), registered_at = now(), credential = excluded.credential, held_at = null
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
                lease_expires_at = now() + ($5::bigint * interval '1 millisecond'), last_heartbeat_at = now(), held_at = null
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

    /**
     * Renews the lease if the fence is current and the runtime was not declared LOST. A lease that
     * merely ran out (nobody declared the runtime LOST: e.g. the control plane itself was away) is
     * renewed too: only a decision ends a runtime (DESIGN.md §3 "Static stability"). A heartbeat
     * also ends a mass-expiry hold. Answers the renewed lease and the task ids placements assign to
     * the runtime (what the heartbeat's answer revokes the others by). Throws StaleFenceError (with
     * the current fence and status, and those task ids) otherwise. One statement: heartbeats are
     * the API's most frequent request, one per runtime every third of the lease.
     */
    async heartbeat(id: string, fence: number, tasks: TaskReport[], leaseTtlMs: number): Promise<HeartbeatRenewal> {
      const { rows } = await db.query<{
        lease_expires_at: Date | null; renewed_fence: string | null; renewed_status: Runtime['status'] | null;
        current_fence: string | null; current_status: Runtime['status'] | null; placed: string[];
      }>(
        HEARTBEAT_STATEMENT,
        [id, fence, leaseTtlMs, JSON.stringify(tasks)],
      );
      const row = rows[0];
      if (row.lease_expires_at && row.renewed_status) {
        return { leaseExpiresAt: row.lease_expires_at.toISOString(), fence: Number(row.renewed_fence), status: row.renewed_status, placedTaskIds: row.placed };
      }
      throw new StaleFenceError(id, fence, row.current_fence === null ? null : Number(row.current_fence), row.current_status, row.placed);
    },

    /**
     * Declares runtime `id` LOST and bumps its fence (claims pause at once; the old incarnation's
     * heartbeats are refused), for a recovery. Idempotent: an already LOST runtime stays as it is.
     * With `expectedFence` (the fence the lease sweeper declared it LOST under) a runtime that is no
     * longer LOST has come back since (it registered again): nothing changes, `came-back`.
     */
    async declareLost(id: string, options: { expectedFence?: number; by: string; reason?: string }): Promise<DeclareLostOutcome> {
      return inTransaction(db, async (client) => {
        const { rows } = await client.query<RuntimeRow>(
          `update runtimes set status = 'LOST', fence = fence + 1, lost_at = now(), held_at = null
            where id = $1 and status <> 'LOST' and $2::bigint is null
            returning ${COLUMNS}`,
          [id, options.expectedFence ?? null],
        );
        if (rows[0]) {
          await client.query(`insert into events (type, subject, detail) values ('runtime.lost', $1, $2)`, [
            id, JSON.stringify({ by: options.by, fence: Number(rows[0].fence), reason: options.reason ?? null, leaseExpiresAt: rows[0].lease_expires_at.toISOString() }),
          ]);
          return { outcome: 'declared', runtime: toRuntime(rows[0]) };
        }
        const found = await client.query<RuntimeRow>(`select ${COLUMNS} from runtimes where id = $1`, [id]);
        const row = found.rows[0];
        if (!row) return { outcome: 'unknown', runtime: null };
        return { outcome: row.status === 'LOST' ? 'already-lost' : 'came-back', runtime: toRuntime(row) };
      });
    },

    /**
     * The lease sweeper's declaration: each candidate whose lease still ran out, that is still at the
     * fence the sweeper saw and is neither LOST nor held, becomes LOST with a bumped fence (one
     * statement, so a heartbeat that renewed a lease meanwhile wins), with one `runtime.lost` event
     * each. Answers those declared, with their new fence.
     */
    async declareExpired(candidates: { id: string; fence: number }[], by: string): Promise<{ id: string; fence: number; leaseExpiresAt: string }[]> {
      if (candidates.length === 0) return [];
      return inTransaction(db, async (client) => {
        const { rows } = await client.query<{ id: string; fence: string; lease_expires_at: Date }>(
          `update runtimes r set status = 'LOST', fence = r.fence + 1, lost_at = now()
             from unnest($1::text[], $2::bigint[]) as c(id, fence)
            where r.id = c.id and r.fence = c.fence and r.status <> 'LOST' and r.held_at is null and r.lease_expires_at <= now()
            returning r.id, r.fence, r.lease_expires_at`,
          [candidates.map((c) => c.id), candidates.map((c) => c.fence)],
        );
        const declared = rows
          .map((r) => ({ id: r.id, fence: Number(r.fence), leaseExpiresAt: r.lease_expires_at.toISOString() }))
          .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
        for (const d of declared) {
          await client.query(`insert into events (type, subject, detail) values ('runtime.lost', $1, $2)`, [
            d.id, JSON.stringify({ by, fence: d.fence, leaseExpiresAt: d.leaseExpiresAt }),
          ]);
        }
        return declared;
      });
    },

    /**
     * A mass expiry: holds the runtimes (neither declared LOST nor recovered automatically, until a
     * heartbeat of theirs, a registration or an operator's recovery) and records one `mass-expiry`
     * event for the zone. Runtimes already held or LOST are left alone; no event when none was newly held.
     */
    async holdForMassExpiry(zone: string, ids: string[], detail: Record<string, unknown>): Promise<string[]> {
      return inTransaction(db, async (client) => {
        const { rows } = await client.query<{ id: string }>(
          `update runtimes set held_at = now() where id = any($1::text[]) and status <> 'LOST' and held_at is null returning id`,
          [ids],
        );
        const held = rows.map((r) => r.id).sort();
        if (held.length) {
          await client.query(`insert into events (type, subject, detail) values ('mass-expiry', $1, $2)`, [
            `zone:${zone}`, JSON.stringify({ ...detail, zone, held }),
          ]);
        }
        return held;
      });
    },

    /**
     * What the lease sweeper judges from, on the database's clock: every runtime not LOST, the API's
     * liveness and the lease it hands out, and this pass recorded as the sweeper's own liveness (a
     * gap since its previous pass longer than the lease makes its `resumedAt` now).
     */
    async beginSweep(): Promise<SweepView> {
      const api = await db.query<{ at: Date; resumed_at: Date; lease_ttl_ms: string | null }>(
        `select at, resumed_at, lease_ttl_ms from control_plane_liveness where component = 'api'`,
      );
      const leaseTtlMs = api.rows[0]?.lease_ttl_ms ? Number(api.rows[0].lease_ttl_ms) : null;
      const sweeper = await recordLiveness('lease-sweeper', leaseTtlMs ?? 0);
      const { rows } = await db.query<{ id: string; labels: Record<string, string>; status: Runtime['status']; fence: string; lease_ms: string; held: boolean }>(
        `select id, labels, status, fence, (extract(epoch from lease_expires_at) * 1000)::bigint as lease_ms, held_at is not null as held
           from runtimes where status <> 'LOST' order by id`,
      );
      const apiRow = api.rows[0];
      return {
        // The sweeper's own write is the moment of the pass: the leases below are judged against it.
        nowMs: sweeper.atMs,
        leaseTtlMs,
        api: apiRow ? { atMs: apiRow.at.getTime(), resumedAtMs: apiRow.resumed_at.getTime() } : null,
        sweeper,
        runtimes: rows.map((r) => ({ id: r.id, labels: r.labels, status: r.status, fence: Number(r.fence), leaseExpiresAtMs: Number(r.lease_ms), held: r.held })),
      };
    },

    /** Runtimes declared LOST that some placement still assigns work to (a recovery is due), with their fence. */
    async lostHoldingWork(): Promise<{ id: string; fence: number }[]> {
      const { rows } = await db.query<{ id: string; fence: string }>(
        `select r.id, r.fence from runtimes r
          where r.status = 'LOST'
            and exists (select 1 from placements p, jsonb_array_elements(p.assignments) a where a->>'runtimeId' = r.id)
          order by r.id`,
      );
      return rows.map((r) => ({ id: r.id, fence: Number(r.fence) }));
    },

    /** Ids of every runtime declared LOST. */
    async lostIds(): Promise<string[]> {
      const { rows } = await db.query<{ id: string }>(`select id from runtimes where status = 'LOST' order by id`);
      return rows.map((r) => r.id);
    },

    recordLiveness,

    /** Every component's liveness (the API's, the lease sweeper's), for /v1/state. */
    async liveness(): Promise<{ component: string; at: string; resumedAt: string; leaseTtlMs: number | null }[]> {
      const { rows } = await db.query<{ component: string; at: Date; resumed_at: Date; lease_ttl_ms: string | null }>(
        'select component, at, resumed_at, lease_ttl_ms from control_plane_liveness order by component',
      );
      return rows.map((r) => ({ component: r.component, at: r.at.toISOString(), resumedAt: r.resumed_at.toISOString(), leaseTtlMs: r.lease_ttl_ms === null ? null : Number(r.lease_ttl_ms) }));
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

    /**
     * Every runtime's protocol fields, without its task reports and its records: what a plan and the
     * scale-out gates read of the whole fleet at every operation (at 1,000 runtimes, parsing those
     * was a large share of the worker's main thread in bench/fleet's profile).
     */
    async fleet(): Promise<Runtime[]> {
      const { rows } = await db.query<FleetRow>(`select ${FLEET_COLUMNS} from runtimes order by id`);
      // A fleet has few distinct label sets: runtimes with the same one share one parsed object (read only).
      const labelSets = new Map<string, Runtime['labels']>();
      return rows.map((row) => {
        let labels = labelSets.get(row.labels);
        if (labels === undefined) labelSets.set(row.labels, (labels = Object.freeze(JSON.parse(row.labels)) as Runtime['labels']));
        return protocolFields(row, labels, row.lease_expires_at);
      });
    },

    /**
     * Which of `ids` are LOST: what a placement's readers ask of the fleet, without reading every
     * runtime (a scale-out's evidence asked it twice, and read the whole fleet each time).
     */
    async lostAmong(ids: readonly string[]): Promise<Set<string>> {
      if (ids.length === 0) return new Set();
      const { rows } = await db.query<{ id: string }>(`select id from runtimes where status = 'LOST' and id = any($1::text[])`, [[...new Set(ids)]]);
      return new Set(rows.map((row) => row.id));
    },
  };
}
export type RuntimeStore = ReturnType<typeof createRuntimeStore>;
