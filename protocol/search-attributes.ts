// The search attributes every scalegate workflow sets, as typed keys: the workflows upsert them,
// the API reads them from visibility, and the dev server / any server is told to register them.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const WORKLOAD_KEY = defineSearchAttributeKey('ScalegateWorkload', SearchAttributeType.KEYWORD);
export const OPERATION_KEY = defineSearchAttributeKey('ScalegateOperation', SearchAttributeType.KEYWORD);
export const PHASE_KEY = defineSearchAttributeKey('ScalegatePhase', SearchAttributeType.KEYWORD);
/** How an operation ended, set at its end: completed, refused, compensated, cancelled or failed (OPERATION_STATUSES). */
export const OUTCOME_KEY = defineSearchAttributeKey('ScalegateOutcome', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTE_KEYS = [WORKLOAD_KEY, OPERATION_KEY, PHASE_KEY, OUTCOME_KEY] as const;

/**
 * Memo key of a start's admission deadline (ISO-8601), set by the API: a start that Temporal
 * records after it was answered 503 by the API, and the workflow refuses to run it.
 */
export const ADMIT_BY_MEMO = 'scalegateAdmitBy';

/**
 * Memo key of the id the API gives each start (a UUID): the Web UI's link to the run's evidence
 * report (its static details, written before Temporal names the run) carries it, and the report
 * route finds the run by it (GET /v1/operations/:workflowId/report?start=).
 */
export const START_ID_MEMO = 'scalegateStartId';
