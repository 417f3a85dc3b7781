// What the global setup of the component and system tests started (test/support/global-setup.ts),
// shared with every test file through one JSON file.
import fs from 'node:fs';

export interface TestEnv {
  temporalAddress: string;
  /** the shared dev server's Web UI (http://127.0.0.1:<port>), for the e2e tests */
  temporalUiUrl: string | null;
  /** admin URL of the shared PostgreSQL (database "postgres"); each stack makes its own database */
  postgresAdminUrl: string;
  /** the shared PostgreSQL's postmaster (a test that freezes a database starts its own: files run side by side) */
  postgresPid: number | null;
  /** the shared Kafka broker (`127.0.0.1:<port>`, what SCALEGATE_KAFKA_BROKERS takes); null when none could run here */
  kafkaBrokers: string | null;
  /** why there is no shared broker (e.g. "no Java 17"), null when there is one */
  kafkaOff: string | null;
  /** the shared Docker engine (DOCKER_HOST), its registry (host:port) and the test image pinned by digest; null when none could run */
  containers: { dockerHost: string; registry: string; image: string } | null;
  /** why there is no engine (e.g. "dockerd is not installed"), null when there is one */
  containersOff: string | null;
  workflowBundlePath: string;
  /** the stack entries bundled to JavaScript (harness/entry-bundles.ts): entry → script */
  entryScripts: Record<string, string>;
  tmpDir: string;
}

export const TEST_ENV_VAR = 'SCALEGATE_TEST_ENV_FILE';

export function testEnv(): TestEnv {
  const file = process.env[TEST_ENV_VAR];
  if (!file) throw new Error('component and system tests run under jest, whose "component" and "system" projects start the shared Temporal server and PostgreSQL (npm test, or npx jest <file>)');
  return JSON.parse(fs.readFileSync(file, 'utf8')) as TestEnv;
}
