// The operations that Idempotency-Keys started (migration 008).
import type { Pool } from 'pg';
import type { StartedOperation } from '../protocol';

export interface RecordedStart extends StartedOperation {
  request: string;
}

export function createOperationStartStore(db: Pool) {
  return {
    async get(key: string): Promise<RecordedStart | null> {
      const { rows } = await db.query(
        'select request, workflow_id, run_id, kind, ui_url from operation_starts where idempotency_key = $1', [key],
      );
      const r = rows[0];
      return r ? { request: r.request, workflowId: r.workflow_id, runId: r.run_id, kind: r.kind, uiUrl: r.ui_url } : null;
    },

    /** Records what the key started; the first record of a key wins (answered to every caller). */
    async record(key: string, start: RecordedStart): Promise<RecordedStart> {
      await db.query(
        `insert into operation_starts (idempotency_key, request, workflow_id, run_id, kind, ui_url) values ($1, $2, $3, $4, $5, $6)
         on conflict (idempotency_key) do nothing`,
        [key, start.request, start.workflowId, start.runId, start.kind, start.uiUrl],
      );
      return (await this.get(key))!;
    },
  };
}
export type OperationStartStore = ReturnType<typeof createOperationStartStore>;
