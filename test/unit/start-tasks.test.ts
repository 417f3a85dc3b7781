// startTasks (issue 23, round trips): every agent is called at once, one agent's tasks one after
// another in placement order, and the statuses come back in placement order. Proved by counting
// the calls in flight, not by timing.
import type { ActivityDeps } from '../../activities/ports';
import { taskActivities } from '../../activities/tasks';
import type { Assignment } from '../../protocol';
import { setTimeout as sleep } from 'node:timers/promises';

const assignment = (taskId: string, runtimeId: string, index: number): Assignment => ({ taskId, runtimeId, index } as Assignment);
const ASSIGNMENTS = [assignment('t0', 'rt-a', 0), assignment('t1', 'rt-b', 1), assignment('t2', 'rt-a', 2), assignment('t3', 'rt-c', 3)];

function depsWith(startTask: (endpoint: string, taskId: string) => Promise<unknown>, recordPorts = jest.fn()): ActivityDeps {
  return {
    stores: {
      registry: { getWorkload: async () => ({ name: 'web', requires: [] }), recordPorts },
      runtimes: { agentTarget: async (id: string) => ({ endpoint: `http://${id}`, credential: 'c' }) },
    },
    agents: { startTask: (target: { endpoint: string }, taskId: string) => startTask(target.endpoint, taskId) },
    now: () => 0,
  } as unknown as ActivityDeps;
}

const input = { workload: 'web', kind: 'service' as const, spec: {}, placementFence: 3, generation: 1, assignments: ASSIGNMENTS };

describe('startTasks', () => {
  it('calls every agent at once, one agent’s tasks in placement order, and answers in placement order', async () => {
    let inFlight = 0;
    let most = 0;
    const order: string[] = [];
    let release!: () => void;
    const threeAgentsBusy = new Promise<void>((resolve) => (release = resolve));
    const recordPorts = jest.fn();
    const deps = depsWith(async (endpoint, taskId) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      order.push(taskId);
      // the three agents called together: let them answer (a sequential start never gets here, and
      // the fallback lets it end so that the count, not a hang, fails the test)
      if (inFlight === 3) release();
      await Promise.race([threeAgentsBusy, sleep(200)]);
      inFlight -= 1;
      return { taskId, state: 'starting', ports: { public: 9000 + Number(taskId[1]), internal: 9100 } };
    }, recordPorts);
    const statuses = await taskActivities(deps).startTasks(input);
    expect(most).toBe(3);
    expect(order.indexOf('t0')).toBeLessThan(order.indexOf('t2')); // rt-a: placement order
    expect(statuses.map((s) => s.taskId)).toEqual(['t0', 't1', 't2', 't3']);
    expect(recordPorts).toHaveBeenCalledWith('web', 3, expect.objectContaining({ t0: { public: 9000, internal: 9100 }, t3: { public: 9003, internal: 9100 } }));
  });

  it('fails once every agent has answered when one refused, and records no ports', async () => {
    const settled: string[] = [];
    const recordPorts = jest.fn();
    const deps = depsWith(async (endpoint, taskId) => {
      await sleep(endpoint === 'http://rt-b' ? 0 : 20);
      settled.push(taskId);
      if (endpoint === 'http://rt-b') throw new Error('rt-b refused');
      return { taskId, state: 'starting' };
    }, recordPorts);
    await expect(taskActivities(deps).startTasks(input)).rejects.toThrow('rt-b refused');
    expect([...settled].sort()).toEqual(['t0', 't1', 't2', 't3']);
    expect(recordPorts).not.toHaveBeenCalled();
  });
});
