// The check of a workflow's input, run by the worker (a local activity the workflow asks first):
// zod and the schemas are built once per process here, not once per workflow run in the sandbox
// (protocol/workflow-inputs.ts says why). Pure: no I/O, so a retry answers the same.
import { checkWorkflowInput, type CheckedWorkflow, type InputCheck } from '../protocol/workflow-inputs';

export function workflowInputActivities() {
  return {
    /** `input` checked against `workflowType`'s schema: the input with its defaults, or the message naming each bad field. */
    async checkWorkflowInput<W extends CheckedWorkflow>(workflowType: W, input: unknown): Promise<InputCheck<W>> {
      return checkWorkflowInput(workflowType, input);
    },
  };
}
