// Cron change windows (DESIGN.md §6 tier policy): parsing and expansion into absolute intervals.
// Shared by the autoscaler's activities and the API's policy validation; a workflow must not load
// the calendar library, so it gets the intervals from an activity.
import { CronExpressionParser } from 'cron-parser';
import type { ChangeInterval } from './autoscale';
import type { ChangeWindowPolicy } from '../protocol/tiers';

/** Upper bound on the occurrences walked per window and call (a `* * * * *` window of 7 days is 10,080). */
const MAX_OCCURRENCES = 20_000;

/** Null when `cron` parses (UTC), else the parser's message. Used by the API to answer 422 naming the field. */
export function cronProblem(cron: string): string | null {
  try {
    CronExpressionParser.parse(cron, { tz: 'UTC' });
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * The intervals [start, start + durationMs) of every window occurrence that overlaps [fromMs, toMs],
 * merged per window and sorted. Pure apart from the library; exported for unit tests.
 */
export function expandChangeWindows(windows: readonly ChangeWindowPolicy[], fromMs: number, toMs: number): ChangeInterval[] {
  const intervals: ChangeInterval[] = [];
  for (const window of windows) {
    const starts: number[] = [];
    // occurrences that started up to durationMs before fromMs may still be open
    const back = CronExpressionParser.parse(window.cron, { tz: 'UTC', currentDate: new Date(fromMs + 1) });
    for (let i = 0; i < MAX_OCCURRENCES && back.hasPrev(); i++) {
      const at = back.prev().getTime();
      if (at + window.durationMs <= fromMs) break;
      starts.push(at);
    }
    const forward = CronExpressionParser.parse(window.cron, { tz: 'UTC', currentDate: new Date(fromMs) });
    for (let i = 0; i < MAX_OCCURRENCES && forward.hasNext(); i++) {
      const at = forward.next().getTime();
      if (at > toMs) break;
      starts.push(at);
    }
    const merged: ChangeInterval[] = [];
    for (const startMs of [...new Set(starts)].sort((a, b) => a - b)) {
      const endMs = startMs + window.durationMs;
      const last = merged[merged.length - 1];
      if (last && startMs <= last.endMs) last.endMs = Math.max(last.endMs, endMs);
      else merged.push({ startMs, endMs, label: `"${window.cron}" (${window.durationMs} ms, UTC)` });
    }
    intervals.push(...merged);
  }
  return intervals.sort((a, b) => a.startMs - b.startMs);
}
