// Audits a workload's sink with plain SQL (DESIGN.md §5 contracts); the audits themselves are
// store/sink-audit.ts, this is their command line. Exit 0 clean, 1 not, 2 error.
// Consumer (default): every source record in the sink exactly once, in offset order per partition,
// and no moment when two tasks held a partition.
// Stream (--stream): every key's count equals its source rows; with --job, also what the sink shows
// against the job's last completed checkpoint, read at one instant.
//
//   tsx scripts/verify-sink.ts --db URL --source orders --sink orders_out [--workload orders]
//   tsx scripts/verify-sink.ts --stream --db URL --source clicks --sink click_counts [--job clicks]
import { parseArgs } from 'node:util';
import { withPool } from '../store/db';
import { auditStreamCheckpoint, auditStreamSink, ownershipOverlaps, verifyExactlyOnce } from '../store/sink-audit';

const USAGE = 'usage: verify-sink --db URL --source TABLE --sink TABLE [--workload NAME]\n       verify-sink --stream --db URL --source TABLE --sink TABLE [--job NAME]';

const print = (answer: unknown) => process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      db: { type: 'string' }, source: { type: 'string' }, sink: { type: 'string' }, workload: { type: 'string' },
      stream: { type: 'boolean' }, job: { type: 'string' },
    },
  });
  const databaseUrl = values.db ?? process.env.DATABASE_URL;
  const { source, sink } = values;
  if (!databaseUrl || !source || !sink) throw new Error(USAGE);
  if (values.stream) {
    const { audit, checkpoint } = await withPool(databaseUrl, 1, async (db) => ({
      audit: await auditStreamSink(db, { source, sink }),
      checkpoint: values.job ? await auditStreamCheckpoint(db, { job: values.job, source, sink }) : undefined,
    }));
    print({ ...audit, ...(checkpoint ? { checkpoint } : {}) });
    process.exitCode = audit.exact && (checkpoint?.consistent ?? true) ? 0 : 1;
    return;
  }
  const audit = await verifyExactlyOnce({ databaseUrl, source, sink });
  const overlaps = values.workload ? await ownershipOverlaps({ databaseUrl, workload: values.workload }) : undefined;
  print({ ...audit, ...(overlaps ? { overlaps } : {}) });
  const clean = audit.missing + audit.duplicates + audit.extra + audit.orderViolations + audit.keyMismatches === 0 && (overlaps?.length ?? 0) === 0;
  process.exitCode = clean ? 0 : 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`verify-sink: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
});
