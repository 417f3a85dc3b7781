// Workloads, their fenced placement records (and the ports agents bound), unplaced work, events,
// and the reconcile pass's inputs key and marker.
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { Assignment, PortPair, ReplicaCount, WorkloadDefinition } from '../protocol';
import type { Placement, Unplaced, Workload } from '../protocol';
import { duplicateTaskIds } from '../domain/task-identity';
import { CodedError } from '../protocol/errors';
import { inTransaction } from './db';
import { runsRevisionOf } from '../lib/revision';

type Queryable = Pool | PoolClient;

export class StalePlacementError extends Error {
  readonly code = 'stale-fence';
  constructor(
    readonly workload: string,
    readonly expectedFence: number,
  ) {
    super(`placement of ${workload} moved past fence ${expectedFence}: a newer decision exists, nothing was written`);
  }
}

/** A placement that names one task id twice: two replicas could never be told apart, so it is never written. */
export class DuplicateTaskIdError extends Error {
  readonly code = 'duplicate-task-id';
  constructor(
    readonly workload: string,
    readonly duplicates: Assignment[],
  ) {
    super(
      `placement of ${workload} refused: task id ${duplicates[0].taskId} is held by ${duplicates
        .map((a) => `index ${a.index} on ${a.runtimeId}`)
        .join(' and ')}; every replica needs an id of its own`,
    );
  }
}

/**
 * A PUT would change a live workload's kind: its running replicas are of the old kind, and nothing
 * of one kind becomes another in place (DESIGN.md §3 "Versions and rollouts"). Nothing was written.
 */
export class KindChangeError extends CodedError {
  constructor(workload: string, from: Workload['kind'], to: Workload['kind']) {
    super('kind-change', `workload ${workload} is a live ${from}; a PUT cannot make it a ${to}. Retire it first (DELETE /v1/workloads/${workload}), then define it again`, { workload, kind: from, requested: to });
  }
}

interface WorkloadRow {
  name: string;
  kind: Workload['kind'];
  definition: WorkloadDefinition;
  revision: string;
  retired: boolean;
}
const toWorkload = (row: WorkloadRow): Workload => {
  const runs = runsRevisionOf(row.definition);
  return { ...row.definition, name: row.name, revision: Number(row.revision), retired: row.retired, ...(runs ? { runs } : {}) } as Workload;
};

/** What a PUT did to what the workload's replicas run: `from` → `to` when it changed a live, placed workload's revision. */
export interface RevisionChange {
  from: string;
  to: string;
  /** replicas placed when the change was recorded (they run `from` until a rollout replaces them) */
  placed: number;
}

interface PlacementRow {
  workload: string;
  fence: string;
  generation: number;
  assignments: Assignment[];
}
const toPlacement = (row: PlacementRow): Placement => ({
  workload: row.workload,
  fence: Number(row.fence),
  generation: row.generation,
  assignments: row.assignments,
});

interface EventRow {
  id: string;
  at: Date;
  type: string;
  subject: string;
  detail: Record<string, unknown>;
}

/** An observable event: runtime.lost, mass-expiry, placement.pending, ... */
export interface StoredEvent {
  id: number;
  at: string;
  type: string;
  subject: string;
  detail: Record<string, unknown>;
}
const toEvent = (row: EventRow): StoredEvent => ({ id: Number(row.id), at: row.at.toISOString(), type: row.type, subject: row.subject, detail: row.detail });

export function createRegistryStore(db: Pool) {
  /**
   * A replica placed without a revision runs the workload's current one: every write records it, so
   * a later PUT that changes what replicas run cannot be mistaken for what they already run.
   */
  async function stampRevisions(workload: string, assignments: Assignment[], q: Queryable): Promise<Assignment[]> {
    if (assignments.every((a) => a.revision !== undefined)) return assignments;
    const { rows } = await q.query<{ kind: string; definition: WorkloadDefinition }>('select kind, definition from workloads where name = $1', [workload]);
    const runs = rows[0] ? runsRevisionOf(rows[0].definition) : undefined;
    return runs ? assignments.map((a) => (a.revision === undefined ? { ...a, revision: runs } : a)) : assignments;
  }

  /**
   * Compare-and-set on the fence: writes only if the record's fence is still `expectedFence`
   * (0 = no record yet), and moves it to expectedFence + 1. A stale writer gets
   * StalePlacementError and changes nothing.
   */
  async function writePlacement(
    workload: string,
    expectedFence: number,
    assignments: Assignment[],
    options: { generation?: number; writer?: string; planId?: string } = {},
    q: Queryable = db,
  ): Promise<Placement> {
    const [repeated] = duplicateTaskIds(assignments);
    if (repeated !== undefined) throw new DuplicateTaskIdError(workload, assignments.filter((a) => a.taskId === repeated));
    assignments = await stampRevisions(workload, assignments, q);
    const params = [workload, expectedFence, JSON.stringify(assignments), options.generation ?? null, options.writer ?? null, options.planId ?? null];
    const { rows } =
      expectedFence === 0
        ? await q.query<PlacementRow>(
            `insert into placements (workload, fence, generation, assignments, updated_by, plan_id)
             values ($1, $2 + 1, coalesce($4, 1), $3, $5, $6)
             on conflict (workload) do nothing returning *`,
            params,
          )
        : await q.query<PlacementRow>(
            `update placements set fence = fence + 1, assignments = $3, generation = coalesce($4, generation),
                    updated_at = now(), updated_by = $5, plan_id = $6, change_seq = nextval('placement_change')
              where workload = $1 and fence = $2 returning *`,
            params,
          );
    if (!rows[0]) throw new StalePlacementError(workload, expectedFence);
    return toPlacement(rows[0]);
  }

  return {
    /**
     * Creates or replaces a workload definition; un-retires it. Returns it with its new revision.
     * A live (not retired) workload keeps its kind: another is KindChangeError, nothing written
     * (judged by the same statement that writes, so a concurrent PUT cannot slip between).
     */
    async putWorkload(name: string, definition: WorkloadDefinition): Promise<Workload> {
      return (await this.putWorkloadRevision(name, definition)).workload;
    },

    /**
     * putWorkload, and what it did to what the replicas run (DESIGN.md §3 "Versions and rollouts"): in
     * one transaction the spec is kept under its revision, and when a live placed workload's revision
     * changes, its replicas are recorded as running the old one (the rollout replaces them; nothing
     * running is touched here). `change` is null when what a replica runs is unchanged.
     */
    async putWorkloadRevision(name: string, definition: WorkloadDefinition): Promise<{ workload: Workload; change: RevisionChange | null }> {
      return inTransaction(db, async (client) => {
        const before = await client.query<WorkloadRow>('select * from workloads where name = $1 for update', [name]);
        const { rows } = await client.query<WorkloadRow>(
          `insert into workloads (name, kind, definition) values ($1, $2, $3)
           on conflict (name) do update set kind = excluded.kind, definition = excluded.definition,
             revision = nextval('registry_revision'), retired = false, updated_at = now()
             where workloads.retired or workloads.kind = excluded.kind
           returning *`,
          [name, definition.kind, JSON.stringify(definition)],
        );
        if (!rows[0]) {
          const live = before.rows[0] ? toWorkload(before.rows[0]) : null;
          throw new KindChangeError(name, live?.kind ?? definition.kind, definition.kind);
        }
        const workload = toWorkload(rows[0]);
        const old = before.rows[0] && !before.rows[0].retired ? toWorkload(before.rows[0]) : null;
        const keep = (w: Workload) => client.query(
          'insert into workload_revisions (workload, revision, spec) values ($1, $2, $3) on conflict do nothing', [name, w.runs, JSON.stringify(w.spec)],
        );
        if (workload.runs) await keep(workload);
        if (!old?.runs || !workload.runs || old.runs === workload.runs) return { workload, change: null };
        await keep(old);
        const placement = await client.query<PlacementRow>('select * from placements where workload = $1 for update', [name]);
        const placed = placement.rows[0]?.assignments ?? [];
        if (placed.some((a) => a.revision === undefined)) {
          await client.query('update placements set assignments = $2 where workload = $1', [
            name, JSON.stringify(placed.map((a) => (a.revision === undefined ? { ...a, revision: old.runs } : a))),
          ]);
        }
        return { workload, change: { from: old.runs, to: workload.runs, placed: placed.length } };
      });
    },

    /** The spec a workload ran at `revision` (null: never recorded). */
    async revisionSpec(name: string, revision: string): Promise<unknown> {
      const { rows } = await db.query<{ spec: unknown }>('select spec from workload_revisions where workload = $1 and revision = $2', [name, revision]);
      return rows[0]?.spec ?? null;
    },

    /**
     * Makes `revision` the workload's current one again (a rollout rolled back): its spec, as kept,
     * becomes the definition's, and the registry revision moves (plans made before are stale).
     */
    async restoreRevision(name: string, revision: string): Promise<Workload> {
      const { rows } = await db.query<WorkloadRow>(
        `update workloads w set definition = jsonb_set(w.definition, '{spec}', r.spec), revision = nextval('registry_revision'), updated_at = now()
           from workload_revisions r
          where w.name = $1 and r.workload = w.name and r.revision = $2 and w.definition->'spec' is distinct from r.spec
         returning w.*`,
        [name, revision],
      );
      const workload = rows[0] ? toWorkload(rows[0]) : await this.getWorkload(name);
      if (!workload || workload.runs !== revision) throw new Error(`workload ${name} has no recorded revision ${revision}`);
      return workload;
    },

    async retireWorkload(name: string): Promise<Workload | null> {
      const { rows } = await db.query<WorkloadRow>(
        `update workloads set retired = true, revision = nextval('registry_revision'), updated_at = now()
          where name = $1 returning *`,
        [name],
      );
      return rows[0] ? toWorkload(rows[0]) : null;
    },

    async getWorkload(name: string): Promise<Workload | null> {
      const { rows } = await db.query<WorkloadRow>('select * from workloads where name = $1', [name]);
      return rows[0] ? toWorkload(rows[0]) : null;
    },

    async listWorkloads(): Promise<Workload[]> {
      const { rows } = await db.query<WorkloadRow>('select * from workloads order by name');
      return rows.map(toWorkload);
    },

    async getPlacement(workload: string, q: Queryable = db): Promise<Placement | null> {
      const { rows } = await q.query<PlacementRow>('select * from placements where workload = $1', [workload]);
      return rows[0] ? toPlacement(rows[0]) : null;
    },

    /**
     * Replicas placed per runtime by every placement but `except`'s: what a plan or a gate for one
     * workload needs of the others, counted where the placements are instead of reading them all.
     */
    async usedSlots(options: { except?: string } = {}): Promise<Record<string, number>> {
      // One row of one JSON object, not a row per runtime: pg's row parsing was most of this read's cost.
      const { rows } = await db.query<{ used: Record<string, number> }>(
        `select coalesce(json_object_agg(runtime_id, used), '{}') as used
           from (select a->>'runtimeId' as runtime_id, count(*)::int as used
                   from placements p cross join lateral jsonb_array_elements(p.assignments) a
                  where p.workload is distinct from $1
                  group by 1) per_runtime`,
        [options.except ?? null],
      );
      return rows[0].used;
    },

    /**
     * Whether a placement still assigns the task to the runtime: one lookup through
     * placements_assignments_idx (010), not a read of every placement.
     */
    async isPlaced(task: { taskId: string; runtimeId: string }): Promise<boolean> {
      const { rows } = await db.query<{ placed: boolean }>(
        `select exists(select 1 from placements
                        where assignments @> jsonb_build_array(jsonb_build_object('taskId', $1::text, 'runtimeId', $2::text))) as placed`,
        [task.taskId, task.runtimeId],
      );
      return rows[0]?.placed ?? false;
    },

    async listPlacements(): Promise<Placement[]> {
      const { rows } = await db.query<PlacementRow>('select * from placements order by workload');
      return rows.map(toPlacement);
    },

    writePlacement,

    /**
     * The fenced write of a plan: refuses (StalePlacementError) when the workload's registry
     * revision or its placement fence moved since `basis` was read; otherwise compare-and-set on the
     * fence. The revision is locked for the write, so a concurrent PUT waits for it. A retry of a
     * write that already happened (its reply was lost) finds its own plan id on the record and
     * returns that record instead of failing its own compare-and-set.
     *
     * `desiredReplicas` is the operation's result as the workload's desired state (DESIGN.md §3 "One
     * desired state"): written in the same transaction as the placement, so a completed scale is
     * what reconcile and recovery restore, and no crash can leave one without the other. Changing it
     * moves the registry revision: a plan made against the old desired state is stale.
     *
     * `spec` (a hot rescale's appended layout) is written in the same transaction too: a layout
     * whose placement write is refused leaves no spec behind (chaos seed 11: a spec with appended
     * bases next to a replan's contiguous placement made every later start invalid).
     */
    async commitPlacement(
      workload: string,
      basis: { registryRevision: number; placementFence: number },
      assignments: Assignment[],
      options: { generation: number; writer: string; planId: string; desiredReplicas?: ReplicaCount; spec?: unknown },
    ): Promise<Placement> {
      return inTransaction(db, async (client) => {
        const { rows } = await client.query<{ revision: string }>('select revision from workloads where name = $1 for update', [workload]);
        const current = await client.query<PlacementRow & { plan_id: string | null }>('select * from placements where workload = $1', [workload]);
        if (current.rows[0]?.plan_id === options.planId && Number(current.rows[0].fence) === basis.placementFence + 1) return toPlacement(current.rows[0]);
        if (!rows[0] || Number(rows[0].revision) !== basis.registryRevision) throw new StalePlacementError(workload, basis.placementFence);
        const placement = await writePlacement(workload, basis.placementFence, assignments, options, client);
        if (options.spec !== undefined) {
          await client.query(
            `update workloads set definition = jsonb_set(definition, '{spec}', $2::jsonb), revision = nextval('registry_revision'), updated_at = now()
              where name = $1 and definition->'spec' is distinct from $2::jsonb`,
            [workload, JSON.stringify(options.spec)],
          );
        }
        if (options.desiredReplicas !== undefined) {
          await client.query(
            `update workloads set definition = jsonb_set(definition, '{replicas}', $2::jsonb), revision = nextval('registry_revision'), updated_at = now()
              where name = $1 and definition->'replicas' is distinct from $2::jsonb`,
            [workload, JSON.stringify(options.desiredReplicas)],
          );
        }
        return placement;
      });
    },

    /**
     * A Kubernetes workload's desired size after a completed operation (DESIGN.md §3 "One desired
     * state"): it has no placement record (the cluster places its pods), so only the replicas move.
     */
    async setDesiredReplicas(workload: string, replicas: number): Promise<void> {
      await db.query(
        `update workloads set definition = jsonb_set(definition, '{replicas}', $2::jsonb), revision = nextval('registry_revision'), updated_at = now()
          where name = $1 and definition->'replicas' is distinct from $2::jsonb`,
        [workload, JSON.stringify(replicas)],
      );
    },

    /**
     * Records the ports the agents bound. They are an observation, not a placement decision: written
     * under the same fence, and only if the fence has not moved meanwhile.
     */
    async recordPorts(workload: string, fence: number, portsByTask: Record<string, PortPair>): Promise<void> {
      await db.query(
        `update placements set assignments = (
           select jsonb_agg(case when $3::jsonb ? (a->>'taskId') then a || jsonb_build_object('ports', $3::jsonb -> (a->>'taskId')) else a end
                            order by ord)
             from jsonb_array_elements(assignments) with ordinality as t(a, ord))
         where workload = $1 and fence = $2`,
        [workload, fence, JSON.stringify(portsByTask)],
      );
    },

    async setUnplaced(entry: Unplaced & { detail?: string }): Promise<void> {
      await db.query(
        `insert into unplaced (workload, reason, missing, detail) values ($1, $2, $3, $4)
         on conflict (workload) do update set reason = excluded.reason, missing = excluded.missing,
           detail = excluded.detail, at = now()`,
        [entry.workload, entry.reason, entry.missing, entry.detail ?? null],
      );
    },

    async clearUnplaced(workload: string): Promise<void> {
      await db.query('delete from unplaced where workload = $1', [workload]);
    },

    async listUnplaced(): Promise<(Unplaced & { detail: string | null; at: string })[]> {
      const { rows } = await db.query('select * from unplaced order by workload');
      return rows.map((r) => ({ workload: r.workload, reason: r.reason, missing: r.missing, detail: r.detail, at: r.at.toISOString() }));
    },

    async emitEvent(type: string, subject: string, detail: Record<string, unknown> = {}): Promise<void> {
      await db.query('insert into events (type, subject, detail) values ($1, $2, $3)', [type, subject, JSON.stringify(detail)]);
    },

    /** The event of `type` an activity recorded under its idempotency key (a retry finds its first call's), or null. */
    async eventByKey(type: string, key: string): Promise<StoredEvent | null> {
      const { rows } = await db.query<EventRow>(`select * from events where type = $1 and detail->>'idempotencyKey' = $2 order by id limit 1`, [type, key]);
      return rows[0] ? toEvent(rows[0]) : null;
    },

    /** How many crash-looping tasks of `workload` were decided `move` within the last `windowMs` (the database's clock). */
    async crashLoopMovesWithin(workload: string, windowMs: number): Promise<number> {
      const { rows } = await db.query<{ n: number }>(
        `select count(*)::int as n from events
          where type = 'task.crash-loop-decided' and detail->>'workload' = $1 and detail->>'action' = 'move'
            and at > now() - ($2::bigint * interval '1 millisecond')`,
        [workload, windowMs],
      );
      return rows[0].n;
    },

    async recentEvents(types: string[], limit = 20): Promise<StoredEvent[]> {
      const { rows } = await db.query<EventRow>(
        'select * from events where type = any($1::text[]) order by id desc limit $2',
        [types, limit],
      );
      return rows.map(toEvent);
    },

    /** Events of the given types after event `afterId`, oldest first (a reader that follows them). */
    async eventsAfter(afterId: number, types: string[], limit = 1000): Promise<StoredEvent[]> {
      const { rows } = await db.query<EventRow>(
        'select * from events where id > $1 and type = any($2::text[]) order by id limit $3',
        [afterId, types, limit],
      );
      return rows.map(toEvent);
    },

    /** The id of the newest event (0: none yet). */
    async lastEventId(): Promise<number> {
      const { rows } = await db.query<{ id: string | null }>('select max(id) as id from events');
      return Number(rows[0]?.id ?? 0);
    },

    /**
     * One cheap read of everything the reconcile pass decides from: the registry revision, the
     * placement change sequence and the set of fresh READY runtimes (with their labels and slots),
     * flat in the number of workloads. A write takes its sequence number before it commits, so a
     * key that counted it could be recorded as seen while the pass's snapshot still lacks the row,
     * and the row would be skipped for good (the reconcile loop left a new workload unplaced under
     * load: placement.test, web-ui.test). So after the sequences it asks whether a write to the
     * workloads or placements is still open (its RowExclusiveLock, held from its first write to its
     * commit): then the key is one no later pass can match, and the next pass runs in full.
     */
    async reconcileInputsKey(): Promise<string> {
      const { rows } = await db.query<{ key: string }>(
        `select md5(concat_ws('|',
                  -- is_called too: a fresh sequence reads last_value 1 both before and after its first nextval
                  (select last_value || ':' || is_called from registry_revision),
                  (select last_value || ':' || is_called from placement_change),
                  (select coalesce(string_agg(id || ':' || labels::text || ':' || slots, ',' order by id), '')
                     from runtimes where status = 'READY' and lease_expires_at > now()))) as key`,
      );
      // After the sequences were read: a write that took its number before is still holding its lock.
      const open = await db.query<{ pid: number }>(
        `select pid from pg_locks
          where locktype = 'relation' and mode = 'RowExclusiveLock' and granted and pid <> pg_backend_pid()
            and database = (select oid from pg_database where datname = current_database())
            and relation in ('workloads'::regclass, 'placements'::regclass)
          limit 1`,
      );
      return open.rows.length ? `${rows[0].key}:writes-open:${randomUUID()}` : rows[0].key;
    },

    async reconcileMarker() {
      const { rows } = await db.query('select * from reconcile_state where id = 1');
      const r = rows[0];
      return { at: r.at ? r.at.toISOString() : null, skipped: r.skipped, inputsKey: r.inputs_key as string | null, passes: Number(r.passes), skips: Number(r.skips) };
    },

    async recordReconcile(inputsKey: string, skipped: boolean): Promise<void> {
      await db.query(
        `update reconcile_state set inputs_key = $1, skipped = $2, at = now(),
                passes = passes + (case when $2 then 0 else 1 end), skips = skips + (case when $2 then 1 else 0 end)
          where id = 1`,
        [inputsKey, skipped],
      );
    },
  };
}
export type RegistryStore = ReturnType<typeof createRegistryStore>;
