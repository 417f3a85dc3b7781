// The operations that Idempotency-Keys started (migrations 008 and 011).
import type { Pool } from 'pg';
import type { StartedOperation } from '../protocol';

export interface RecordedStart extends StartedOperation {
  /** what the key was used for: method and path, e.g. "POST /v1/workloads/web/scale" */
  request: string;
  /** sha256 of the request's validated body as canonical JSON; null for a start recorded before migration 011 */
  bodySha256: string | null;
}

export function createOperationStartStore(db: Pool) {
  return {
    async get(key: string): Promise<RecordedStart | null> {
      const { rows } = await db.query(
        'select request, body_sha256, workflow_id, run_id, kind, ui_url from operation_starts where idempotency_key = $1', [key],
      );
      const r = rows[0];
      return r ? { request: r.request, bodySha256: r.body_sha256, workflowId: r.workflow_id, runId: r.run_id, kind: r.kind, uiUrl: r.ui_url } : null;
    },

    /** Records what the key started; the first record of a key wins (answered to every caller). */
    async record(key: string, start: RecordedStart): Promise<RecordedStart> {
      await db.query(
        `insert into operation_starts (idempotency_key, request, body_sha256, workflow_id, run_id, kind, ui_url) values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (idempotency_key) do nothing`,
        [key, start.request, start.bodySha256, start.workflowId, start.runId, start.kind, start.uiUrl],
      );
      return (await this.get(key))!;
    },
  };
}
export type OperationStartStore = ReturnType<typeof createOperationStartStore>;
