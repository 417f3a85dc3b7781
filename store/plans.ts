// Stored plans: what the planner computed (the plan route, scale operations, the reconcile pass), kept for apply.
import crypto from 'node:crypto';
import type { Pool } from 'pg';
import type { Plan } from '../domain/plan';

export interface StoredPlan extends Plan {
  id: string;
  createdAt: string;
  appliedWorkflow: string | null;
}

export function createPlanStore(db: Pool) {
  return {
    /** Stores a plan under a new id (apply checks its basis later). */
    async save(plan: Plan): Promise<StoredPlan> {
      const id = `plan-${crypto.randomUUID()}`;
      const { rows } = await db.query(
        `insert into plans (id, workload, replicas, basis_revision, basis_fence, body)
         values ($1, $2, $3, $4, $5, $6) returning created_at`,
        [id, plan.workload, JSON.stringify(plan.replicas), plan.basis.registryRevision, plan.basis.placementFence, JSON.stringify(plan)],
      );
      return { ...plan, id, createdAt: rows[0].created_at.toISOString(), appliedWorkflow: null };
    },

    async get(id: string): Promise<StoredPlan | null> {
      const { rows } = await db.query('select * from plans where id = $1', [id]);
      const row = rows[0];
      return row ? { ...(row.body as Plan), id: row.id, createdAt: row.created_at.toISOString(), appliedWorkflow: row.applied_workflow } : null;
    },

    /** Marks the plan applied by a workflow; false when another apply took it first. */
    async markApplied(id: string, workflowId: string): Promise<boolean> {
      const result = await db.query('update plans set applied_workflow = $2 where id = $1 and applied_workflow is null', [id, workflowId]);
      return (result.rowCount ?? 0) > 0;
    },
  };
}
export type PlanStore = ReturnType<typeof createPlanStore>;
