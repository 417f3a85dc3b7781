// Task identity (DESIGN.md §3): a task id names one incarnation of one replica for its whole life.
// Victims, survivors, owner fences and revocations all key on it, so one id may never name two
// replicas. Pure and free of node:crypto, so the workflows (scale-in's choice) may use it too.
import type { Assignment } from '../protocol';

/** The task ids that occur more than once among `assignments` (empty when every id is distinct). */
export function duplicateTaskIds(assignments: readonly Pick<Assignment, 'taskId'>[]): string[] {
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const { taskId } of assignments) (seen.has(taskId) ? repeated : seen).add(taskId);
  return [...repeated];
}

/**
 * A new task's id. A generation's first placement names its tasks `<name>-<index>-g<generation>`;
 * every later write of the generation suffixes the fence it writes (which only grows), so an id is
 * never minted twice even when scale-ins re-index survivors onto lower indices.
 */
export function taskIdFor(name: string, index: number, generation: number, writtenFence?: number): string {
  return `${name}-${index}-g${generation}${writtenFence === undefined ? '' : `-f${writtenFence}`}`;
}
