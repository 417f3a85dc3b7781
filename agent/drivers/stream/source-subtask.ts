// A stream job's source subtask (DESIGN.md §5 "stream"): reads its partitions of the job's source
// through the source port (a table, or a Kafka topic), routes each record by key group to an
// aggregate subtask, and injects each triggered checkpoint's barrier between two batches, after
// snapshotting the offsets it has emitted. Upstream of a hot rescale of the aggregate, it holds the
// rescaled edge at barrier C and moves to the new peers (StreamSubtask.holdThenMoveToNewPeers).
import { blockOf, keyGroupOf, ownerOfKeyGroup, sourcePartitions } from '../../../domain/stream';
import { BARRIER, RECORD, WATERMARK } from '../../../protocol';
import type { SourcePort } from '../sources';
import type { CompletedCheckpoint } from './job-state';
import { SourceOffsets } from './operator-state';
import { StreamSubtask } from './subtask';
import { messageOf } from '../../../lib/errors';

/** how often a source refreshes its backlog figure from the source's newest offsets */
const BACKLOG_REFRESH_MS = 1_000;

export class SourceSubtask extends StreamSubtask {
  protected readonly input = null;

  protected async process(restorePoint: CompletedCheckpoint | null): Promise<void> {
    const source = this.deps.openSource((error) => {
      // a Kafka reader KafkaJS gave up on: counted; the next read reopens it
      this.errors.add();
      this.log('stream source reader failed; it reopens at the next read', { error: messageOf(error) });
    });
    try {
      await this.durably(`prepare ${source.description}`, () => source.prepare());
      await this.read(source, restorePoint);
    } finally {
      await source.close().catch(() => {});
    }
  }

  private async read(source: SourcePort, restorePoint: CompletedCheckpoint | null): Promise<void> {
    const offsets = new SourceOffsets(sourcePartitions(this.identity.operatorIndex, this.identity.parallelism, this.spec.partitions));
    const restoreStarted = Date.now();
    if (restorePoint) offsets.restore(await this.durably('load source offsets', () => this.state.snapshotStates<{ offsets: Record<string, number> }>(restorePoint, 'source')));
    this.counters.restoreMs = Date.now() - restoreStarted;
    let aggregate = blockOf(this.spec, 'keyed-aggregate');
    let injected = restorePoint?.id ?? 0;
    let lastTriggerPoll = 0;
    let lastBacklog = 0;
    while (this.active) {
      const now = Date.now();
      if (now - lastTriggerPoll >= this.deps.tuning.triggerPollMs) {
        lastTriggerPoll = now;
        for (const checkpoint of await this.durably('read checkpoint triggers', () => this.state.triggeredAfter(this.start.generation, injected))) {
          const snapshotStarted = Date.now();
          const state = offsets.snapshot();
          await this.durably(`snapshot checkpoint ${checkpoint}`, () => this.state.snapshot({ checkpoint, generation: this.start.generation, subtask: this.identity.index, operator: this.identity.operator, kind: 'source', state }));
          this.counters.snapshotMs = Date.now() - snapshotStarted;
          this.broadcast([BARRIER, checkpoint]);
          await this.flushOutputs();
          injected = checkpoint;
          this.ack(checkpoint);
          if (this.cutover?.role === 'upstream' && checkpoint === this.cutover.checkpoint) {
            await this.holdThenMoveToNewPeers();
            aggregate = blockOf(this.spec, 'keyed-aggregate');
          }
        }
      }
      if (now - lastBacklog >= BACKLOG_REFRESH_MS) {
        lastBacklog = now;
        const newest = await this.durably('read the backlog', () => source.newestOffsets(offsets.partitions));
        this.backlog = offsets.backlog(newest);
      }
      const records = await this.durably(`read ${source.description}`, () => source.readEach(offsets.offsets, this.deps.tuning.batchPerPartition));
      if (!this.active) return;
      let watermark = 0;
      const readAt = Date.now();
      for (const record of records) {
        // a source that does not say when a record was appended: latency counts from the read
        const at = record.appendedMs ?? readAt;
        const target = aggregate.base + ownerOfKeyGroup(keyGroupOf(record.key, this.spec.maxParallelism), aggregate.parallelism, this.spec.maxParallelism);
        this.outputs.get(target)!.push([RECORD, record.key, at]);
        offsets.advance(record.partition, record.offset);
        if (at > watermark) watermark = at;
      }
      this.counters.recordsRead += records.length;
      this.counters.readPosition = offsets.position;
      this.counters.recordsIn += records.length;
      this.counters.recordsOut += records.length;
      if (watermark > this.counters.watermark) {
        this.counters.watermark = watermark;
        this.broadcast([WATERMARK, watermark]);
      }
      await this.flushOutputs();
      if (records.length === 0) await this.idle(this.deps.tuning.idlePollMs);
    }
  }
}
