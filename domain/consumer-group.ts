// A user's own consumer group as evidence (DESIGN.md §5 "A user's own consumer group"): scalegate
// runs the user's command and the group protocol moves the partitions, so the broker's view of the
// group, not the agents', says whether the replicas converged and whether a drain let go.
// The rule: one group member per replica.

/** What the broker says of a group on its topic (lib/kafka.ts reads it). */
export interface GroupFacts {
  group: string;
  topic: string;
  state: string;
  partitions: number;
  members: { clientId: string; partitions: number[] }[];
  unassigned: number[];
  lag: number;
}

export interface GroupVerdict {
  converged: boolean;
  detail: string;
}

/** "0-3, 5" */
export function partitionList(partitions: readonly number[]): string {
  const sorted = [...partitions].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    runs.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j;
  }
  return runs.join(', ');
}

/**
 * Has the group converged on `replicas` members, each a replica, holding every partition between
 * them? `removedTasks`: tasks a scale-in drained, none of which may still be a member (a member is
 * matched to a task when its client id names the task id, as the fixture consumer's does).
 */
export function groupConvergence(facts: GroupFacts, replicas: number, removedTasks: readonly string[] = []): GroupVerdict {
  const name = `consumer group ${facts.group} on topic ${facts.topic}`;
  const lingering = facts.members.filter((m) => removedTasks.some((task) => m.clientId.includes(task)));
  if (lingering.length) {
    return { converged: false, detail: `${name}: drained ${lingering.map((m) => m.clientId).join(', ')} still a member` };
  }
  if (facts.members.length !== replicas) {
    return { converged: false, detail: `${name}: ${facts.members.length} member(s) for ${replicas} replica(s) (state ${facts.state})` };
  }
  if (replicas === 0) return { converged: true, detail: `${name}: no member, as no replica runs; lag ${facts.lag}` };
  if (facts.state !== 'Stable') return { converged: false, detail: `${name}: rebalancing (state ${facts.state})` };
  if (facts.unassigned.length) {
    return { converged: false, detail: `${name}: partition(s) ${partitionList(facts.unassigned)} of ${facts.partitions} assigned to no member` };
  }
  const owners = facts.members.filter((m) => m.partitions.length > 0).length;
  return { converged: true, detail: `${name}: ${replicas} member(s), ${owners} owning partitions, all ${facts.partitions} assigned; lag ${facts.lag}` };
}

/**
 * Records behind on a topic: per partition, its end offset (the next to be written) − (the last
 * processed offset + 1); a partition with nothing processed counts from 0 (a topic never truncated
 * by retention).
 */
export function lagBehind(endOffsets: ReadonlyMap<number, number>, lastProcessed: ReadonlyMap<number, number>): number {
  let lag = 0;
  for (const [partition, end] of endOffsets) lag += Math.max(0, end - ((lastProcessed.get(partition) ?? -1) + 1));
  return lag;
}
