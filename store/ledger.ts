// The append-only scale ledger.
import type { Pool } from 'pg';
import type { LedgerEvent } from '../protocol/api';
import type { LedgerKind, LedgerOutcome } from '../protocol/ledger';

export interface LedgerEntry {
  kind: LedgerKind;
  workload?: string | null;
  tier?: string | null;
  fromReplicas?: number | null;
  toReplicas?: number | null;
  reason?: string | null;
  inputs?: Record<string, unknown>;
  planId?: string | null;
  workflowId?: string | null;
  runId?: string | null;
  outcome?: LedgerOutcome | null;
  evidence?: unknown;
  /** makes a retried write one row */
  idempotencyKey?: string | null;
}

/** A row as read back: every column (null when unset), as GET /v1/ledger answers it. */
export type LedgerRow = LedgerEvent;

/** What /metrics reads from the ledger. */
export interface LedgerStats {
  byOutcome: { kind: string; outcome: string; count: number }[];
  gateFailures: { gate: string; count: number }[];
  autoscaleDecisions: { decision: string; count: number }[];
}

export function createLedgerStore(db: Pool) {
  return {
    async append(entry: LedgerEntry): Promise<number | null> {
      const { rows } = await db.query<{ id: string }>(
        `insert into ledger (kind, workload, tier, from_replicas, to_replicas, reason, inputs, plan_id,
                             workflow_id, run_id, outcome, evidence, idempotency_key)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         on conflict (idempotency_key) do nothing
         returning id`,
        [
          entry.kind, entry.workload ?? null, entry.tier ?? null, entry.fromReplicas ?? null, entry.toReplicas ?? null,
          entry.reason ?? null, JSON.stringify(entry.inputs ?? {}), entry.planId ?? null, entry.workflowId ?? null,
          entry.runId ?? null, entry.outcome ?? null, entry.evidence === undefined ? null : JSON.stringify(entry.evidence),
          entry.idempotencyKey ?? null,
        ],
      );
      return rows[0] ? Number(rows[0].id) : null;
    },

    /**
     * Counts for /metrics, read at scrape time: rows per kind and outcome, and failed gate rows by
     * gate (from the `inputs.gates` every scale-out row carries).
     */
    async stats(): Promise<LedgerStats> {
      const [byOutcome, gateFailures, autoscaleDecisions] = await Promise.all([
        db.query<{ kind: string; outcome: string; n: string }>(
          `select kind, coalesce(outcome, 'none') as outcome, count(*) as n from ledger group by 1, 2`,
        ),
        db.query<{ gate: string; n: string }>(
          `select g->>'gate' as gate, count(*) as n
             from ledger
             cross join lateral jsonb_array_elements(case when jsonb_typeof(inputs->'gates') = 'array' then inputs->'gates' else '[]'::jsonb end) as g
            where g->>'passed' = 'false'
            group by 1`,
        ),
        // The autoscaler's decision labels are a fixed set (workflows/autoscaler.ts), so they make a bounded label.
        db.query<{ decision: string; n: string }>(
          `select inputs->>'decision' as decision, count(*) as n from ledger where kind = 'autoscale' and inputs ? 'decision' group by 1`,
        ),
      ]);
      return {
        byOutcome: byOutcome.rows.map((r) => ({ kind: r.kind, outcome: r.outcome, count: Number(r.n) })),
        gateFailures: gateFailures.rows.map((r) => ({ gate: r.gate, count: Number(r.n) })),
        autoscaleDecisions: autoscaleDecisions.rows.map((r) => ({ decision: r.decision, count: Number(r.n) })),
      };
    },

    /** Newest first. */
    async list(filter: { workload?: string; kind?: string; limit: number }): Promise<LedgerRow[]> {
      const { rows } = await db.query(
        `select * from ledger
          where ($1::text is null or workload = $1) and ($2::text is null or kind = $2)
          order by id desc limit $3`,
        [filter.workload ?? null, filter.kind ?? null, filter.limit],
      );
      return rows.map((r) => ({
        id: Number(r.id), at: r.at.toISOString(), kind: r.kind, workload: r.workload, tier: r.tier,
        fromReplicas: r.from_replicas, toReplicas: r.to_replicas, reason: r.reason, inputs: r.inputs,
        planId: r.plan_id, workflowId: r.workflow_id, runId: r.run_id, outcome: r.outcome, evidence: r.evidence,
      }));
    },
  };
}
export type LedgerStore = ReturnType<typeof createLedgerStore>;
