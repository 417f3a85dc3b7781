// Every activity type a kept history schedules is one the worker registers. A kept history is a run
// that may still be open when a new worker takes over (docs/workflows.md, "Patches"): replaying its
// old branch schedules the activity by the name recorded there, and a worker that no longer
// registers that name fails the activity task ("not registered") forever. An activity renamed under
// a patch (drainTasks, recorded as stopTasks before drain-tasks-named) keeps its old name
// registered until that patch's old branch is removed.
import fs from 'node:fs';
import path from 'node:path';
import { createActivities, type ActivityDeps } from '../../activities';
import { HISTORIES_DIR } from '../../harness/histories/record-histories';

/** Stands for every dependency: creating the activities reads their ports and calls none. */
const anyPort: unknown = new Proxy(function port() {}, { get: () => anyPort, apply: () => anyPort });
const registered = new Set(Object.keys(createActivities(anyPort as ActivityDeps)));

const scheduledByHistories = (): Map<string, string[]> => {
  const byName = new Map<string, string[]>();
  for (const file of fs.readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json') && f !== 'manifest.json')) {
    const history = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8')) as { events: Record<string, any>[] };
    for (const event of history.events) {
      const name = event.activityTaskScheduledEventAttributes?.activityType?.name as string | undefined;
      if (name) byName.set(name, [...(byName.get(name) ?? []), file]);
    }
  }
  return byName;
};

test('the worker registers every activity type a kept history schedules', () => {
  const scheduled = scheduledByHistories();
  expect(scheduled.size).toBeGreaterThan(20);
  const missing = [...scheduled].filter(([name]) => !registered.has(name)).map(([name, files]) => `${name} (${files.length} histories, e.g. ${files[0]})`);
  expect(missing).toEqual([]);
});

test('the drain is registered under its name and under the name runs before drain-tasks-named recorded', () => {
  const activities = createActivities(anyPort as ActivityDeps);
  expect(activities.stopTasks).toBe(activities.drainTasks);
  const scheduled = scheduledByHistories();
  expect(scheduled.get('stopTasks')?.length).toBeGreaterThan(0);
  expect(scheduled.get('drainTasks')?.length).toBeGreaterThan(0);
});
