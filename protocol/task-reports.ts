// What a heartbeat route reports to a deciding workflow: task ids one runtime reported in a state
// (small: the workflow bundle imports it, test/unit/workflow-imports.test.ts).
import { z } from 'zod';

/** Crash-looping tasks one runtime reported (its heartbeat → signal `crashLooping` of handleCrashLoops). */
export const CrashLoopingTasksSchema = z.strictObject({
  runtimeId: z.string().min(1).max(63),
  taskIds: z.array(z.string().min(1).max(200)).min(1).max(10_000),
});
export type CrashLoopingTasks = z.infer<typeof CrashLoopingTasksSchema>;
