// A load generator for consumer workloads: appends records to a source table at a steady rate
// (store/source-feed.ts does the work; this is its command line) and prints JSON of what it wrote.
//
//   tsx scripts/loadgen.ts --db URL --source orders --partitions 8 --rate 200 --count 1000
//   (or --duration-ms 10000; without either it runs until Ctrl-C)
import { parseArgs } from 'node:util';
import { runLoad } from '../store/source-feed';

const USAGE = 'usage: loadgen --db URL --source TABLE [--partitions 8] [--rate 200] [--count N | --duration-ms MS] [--keys 1024]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      db: { type: 'string' }, source: { type: 'string' }, partitions: { type: 'string' }, rate: { type: 'string' },
      count: { type: 'string' }, 'duration-ms': { type: 'string' }, keys: { type: 'string' },
    },
  });
  const databaseUrl = values.db ?? process.env.DATABASE_URL;
  if (!databaseUrl || !values.source) throw new Error(USAGE);
  const optionalNumber = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  process.once('SIGTERM', () => controller.abort());
  const result = await runLoad({
    databaseUrl,
    source: values.source,
    partitions: Number(values.partitions ?? 8),
    ratePerSec: Number(values.rate ?? 200),
    count: optionalNumber(values.count),
    durationMs: optionalNumber(values['duration-ms']),
    keySpace: optionalNumber(values.keys),
    signal: controller.signal,
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`loadgen: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
