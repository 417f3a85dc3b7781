// A load generator for consumer workloads: appends records to a source table, or produces them to
// a Kafka topic (created with --partitions if missing), at a steady rate (store/source-feed.ts and
// store/kafka-feed.ts do the work; this is their command line) and prints JSON of what it wrote.
//
//   tsx scripts/loadgen.ts --db URL --source orders --partitions 8 --rate 200 --count 1000
//   tsx scripts/loadgen.ts --kafka 127.0.0.1:9092 --topic orders --partitions 6 --rate 200 --count 1000
//   (or --duration-ms 10000; without either it runs until Ctrl-C)
import { parseArgs } from 'node:util';
import { runKafkaLoad } from '../store/kafka-feed';
import { runLoad } from '../store/source-feed';

const USAGE = 'usage: loadgen (--db URL --source TABLE | --kafka BROKERS --topic TOPIC) [--partitions 8] [--rate 200] [--count N | --duration-ms MS] [--keys 1024]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      db: { type: 'string' }, source: { type: 'string' }, partitions: { type: 'string' }, rate: { type: 'string' },
      count: { type: 'string' }, 'duration-ms': { type: 'string' }, keys: { type: 'string' },
      kafka: { type: 'string' }, topic: { type: 'string' },
    },
  });
  const optionalNumber = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  process.once('SIGTERM', () => controller.abort());
  const paced = {
    partitions: Number(values.partitions ?? 8),
    ratePerSec: Number(values.rate ?? 200),
    count: optionalNumber(values.count),
    durationMs: optionalNumber(values['duration-ms']),
    keySpace: optionalNumber(values.keys),
    signal: controller.signal,
  };
  if (values.kafka !== undefined || values.topic !== undefined) {
    if (!values.kafka || !values.topic) throw new Error(USAGE);
    const { acked: _acked, ...result } = await runKafkaLoad({ ...paced, brokers: values.kafka, topic: values.topic });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const databaseUrl = values.db ?? process.env.DATABASE_URL;
  if (!databaseUrl || !values.source) throw new Error(USAGE);
  const result = await runLoad({ ...paced, databaseUrl, source: values.source });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`loadgen: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
