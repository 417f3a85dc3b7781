// Tier policies (migration 007) and the ledger rows the autoscaler wrote for a tier.
import type { Pool } from 'pg';
import type { StoredTierPolicy, TierPolicy } from '../protocol/tiers';
import type { LedgerRow } from './ledger';

const toStored = (r: { tier: string; revision: string; policy: TierPolicy; updated_at: Date }): StoredTierPolicy => ({
  tier: r.tier, revision: Number(r.revision), policy: r.policy, updatedAt: r.updated_at.toISOString(),
});

export function createTierStore(db: Pool) {
  return {
    /** Inserts or replaces the policy; the revision goes up by one on every write (1 for a new tier). */
    async putPolicy(tier: string, policy: TierPolicy): Promise<StoredTierPolicy & { created: boolean }> {
      const { rows } = await db.query(
        `insert into tier_policies (tier, revision, policy) values ($1, 1, $2)
         on conflict (tier) do update set revision = tier_policies.revision + 1, policy = excluded.policy, updated_at = now()
         returning tier, revision, policy, updated_at, (xmax = 0) as created`,
        [tier, JSON.stringify(policy)],
      );
      return { ...toStored(rows[0]), created: rows[0].created };
    },

    async getPolicy(tier: string): Promise<StoredTierPolicy | null> {
      const { rows } = await db.query(`select tier, revision, policy, updated_at from tier_policies where tier = $1`, [tier]);
      return rows[0] ? toStored(rows[0]) : null;
    },

    /** Every tier with a policy, by name. */
    async listPolicies(): Promise<StoredTierPolicy[]> {
      const { rows } = await db.query(`select tier, revision, policy, updated_at from tier_policies order by tier`);
      return rows.map(toStored);
    },

    /** Every tier whose policy names `workload` (its constraints hold at every entry point). */
    async policiesOfWorkload(workload: string): Promise<StoredTierPolicy[]> {
      const { rows } = await db.query(
        `select tier, revision, policy, updated_at from tier_policies where policy->'workloads' ? $1 order by tier`, [workload],
      );
      return rows.map(toStored);
    },

    /** The newest autoscale ledger rows of a tier, newest first. */
    async recentDecisions(tier: string, limit = 10): Promise<LedgerRow[]> {
      const { rows } = await db.query(
        `select * from ledger where tier = $1 and kind = 'autoscale' order by id desc limit $2`,
        [tier, limit],
      );
      return rows.map((r) => ({
        id: Number(r.id), at: r.at.toISOString(), kind: r.kind, workload: r.workload, tier: r.tier,
        fromReplicas: r.from_replicas, toReplicas: r.to_replicas, reason: r.reason, inputs: r.inputs,
        planId: r.plan_id, workflowId: r.workflow_id, runId: r.run_id, outcome: r.outcome, evidence: r.evidence,
      }));
    },
  };
}
export type TierStore = ReturnType<typeof createTierStore>;
