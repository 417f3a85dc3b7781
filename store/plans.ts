// Stored plans: what POST /v1/workloads/:name/plan computed, kept for apply.
import crypto from 'node:crypto';
import type { Pool } from 'pg';
import { buildPlan, Plan } from '../domain/plan';
import type { ReplicaCount } from '../protocol';
import type { Workload } from '../protocol';
import { createRegistryStore } from './registry';
import { createRuntimeStore } from './runtimes';

export interface StoredPlan extends Plan {
  id: string;
  createdAt: string;
  appliedWorkflow: string | null;
}

export function createPlanStore(db: Pool) {
  const runtimes = createRuntimeStore(db);
  const registry = createRegistryStore(db);

  async function save(plan: Plan): Promise<StoredPlan> {
    const id = `plan-${crypto.randomUUID()}`;
    const { rows } = await db.query(
      `insert into plans (id, workload, replicas, basis_revision, basis_fence, body)
       values ($1, $2, $3, $4, $5, $6) returning created_at`,
      [id, plan.workload, JSON.stringify(plan.replicas), plan.basis.registryRevision, plan.basis.placementFence, JSON.stringify(plan)],
    );
    return { ...plan, id, createdAt: rows[0].created_at.toISOString(), appliedWorkflow: null };
  }

  return {
    save,

    /** Plans a replica change on the current basis (fleet, placements, registry) and stores it. */
    async planAndSave(workload: Workload, replicas: ReplicaCount, options: { nowMs: number; newGeneration?: boolean }): Promise<StoredPlan> {
      const [all, placements, workloads] = await Promise.all([runtimes.list(), registry.listPlacements(), registry.listWorkloads()]);
      return save(buildPlan({ workload, replicas, runtimes: all, placements, workloads, nowMs: options.nowMs, newGeneration: options.newGeneration }));
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
