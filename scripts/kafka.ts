// Provisions the embedded Kafka broker's jars (see embedded/kafka.ts: Maven Central through mvn,
// into the cache) and prints where they are, how many, their size and the Java that runs them.
// `npm run kafka:install`; used by .ci/run.
import fs from 'node:fs';
import path from 'node:path';
import { ensureKafka, KAFKA_VERSION } from '../embedded/kafka';

ensureKafka((line) => console.error(`[kafka] ${line}`)).then((install) => {
  const jars = fs.readdirSync(install.lib).filter((f) => f.endsWith('.jar'));
  const bytes = jars.reduce((sum, jar) => sum + fs.statSync(path.join(install.lib, jar)).size, 0);
  console.log(`${install.lib}\tKafka ${KAFKA_VERSION}\t${jars.length} jars, ${(bytes / 1024 / 1024).toFixed(1)} MB\tJava ${install.javaVersion} (${install.java})`);
}, (error: Error) => {
  console.error(`[kafka] ${error.message}`);
  process.exit(1);
});
