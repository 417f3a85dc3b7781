// Reading workflow histories in the benches: when each event happened.
import type { temporal } from '@temporalio/proto';

/** A history event's time (a protobuf Timestamp) in epoch milliseconds. */
export const millisOf = (time: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  Number(time?.seconds ?? 0) * 1000 + Math.floor((time?.nanos ?? 0) / 1e6);

/** An event's time in epoch milliseconds. */
export const eventMillis = (event: temporal.api.history.v1.IHistoryEvent): number => millisOf(event.eventTime);
