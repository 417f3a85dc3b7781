// Audits a consumer workload with plain SQL (DESIGN.md §5 contract): every source record in the
// sink exactly once, in offset order per partition, and no moment when two tasks held a partition.
// The audit itself is store/sink-audit.ts; this is its command line. Exit 0 clean, 1 not, 2 error.
//
//   tsx scripts/verify-sink.ts --db URL --source orders --sink orders_out [--workload orders]
import { parseArgs } from 'node:util';
import { ownershipOverlaps, verifyExactlyOnce } from '../store/sink-audit';

const USAGE = 'usage: verify-sink --db URL --source TABLE --sink TABLE [--workload NAME]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { db: { type: 'string' }, source: { type: 'string' }, sink: { type: 'string' }, workload: { type: 'string' } },
  });
  const databaseUrl = values.db ?? process.env.DATABASE_URL;
  if (!databaseUrl || !values.source || !values.sink) throw new Error(USAGE);
  const audit = await verifyExactlyOnce({ databaseUrl, source: values.source, sink: values.sink });
  const overlaps = values.workload ? await ownershipOverlaps({ databaseUrl, workload: values.workload }) : undefined;
  process.stdout.write(`${JSON.stringify({ ...audit, ...(overlaps ? { overlaps } : {}) }, null, 2)}\n`);
  const clean = audit.missing + audit.duplicates + audit.extra + audit.orderViolations + audit.keyMismatches === 0 && (overlaps?.length ?? 0) === 0;
  process.exitCode = clean ? 0 : 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`verify-sink: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
});
