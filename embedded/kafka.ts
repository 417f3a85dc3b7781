// The embedded Apache Kafka broker behind `npm start` and the tests (DESIGN.md §5, "Kafka sources"):
// one KRaft node that is both broker and controller, run from the official jars of Maven Central's
// `org.apache.kafka:kafka_2.13` on Java 17 or later, as a child process we control.
//
// The jars come through `mvn` (the ordinary Maven client: its settings, mirrors and ~/.m2 apply)
// into the cache outside the repo, `<cache>/kafka-<version>/lib` (the same cache root as the
// Temporal CLI: SCALEGATE_CACHE_DIR, else XDG_CACHE_HOME/scalegate, else ~/.cache/scalegate), once:
// a generated pom lists the broker (plus log4j's slf4j binding, so the broker's log has lines), the
// runtime dependencies are copied into a staging folder, and the folder is renamed into place, so
// a concurrent start never sees half of it. `npm run kafka:install` (scripts/kafka.ts) does it ahead.
//
// The quorum is static (`controller.quorum.voters`), not the dynamic `--standalone` one: a dynamic
// quorum records the controller's endpoint in the formatted log, and the controller listener takes
// a fresh free port at every start.
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { kafkaClient } from '../lib/kafka';
import { freePort, stopChild } from './processes';
import { cacheRoot, onPath } from './temporal-cli';
import { setTimeout as sleep } from 'node:timers/promises';

/** Pinned: the broker's version (Maven Central serves it; docker-compose runs the apache/kafka image). */
export const KAFKA_VERSION = '4.4.0';
/** Kafka 4's broker needs Java 17. */
export const MIN_JAVA = 17;
const BROKER_ARTIFACT = { groupId: 'org.apache.kafka', artifactId: 'kafka_2.13', version: KAFKA_VERSION };
/** Kafka logs through slf4j 1.7; its pom brings log4j-core but no binding (the distribution's tarball adds this one). */
const LOG_BINDING = { groupId: 'org.apache.logging.log4j', artifactId: 'log4j-slf4j-impl', version: '2.25.5' };
const BROKER_JAR = `${BROKER_ARTIFACT.artifactId}-${KAFKA_VERSION}.jar`;
/** Where a start waits for its broker to answer a metadata request. */
const READY_TIMEOUT_MS = 90_000;
/** SIGTERM is a controlled shutdown (about 3 s for one node); SIGKILL after this. */
const STOP_GRACE_MS = 15_000;
/** The config files startKafka writes into the data folder (Kafka's log dirs hold only folders of their own). */
const SERVER_PROPERTIES = 'scalegate-server.properties';
const LOG4J_PROPERTIES = 'scalegate-log4j2.properties';

export interface KafkaInstall {
  /** the `java` that runs the broker */
  java: string;
  /** its major version (≥ MIN_JAVA) */
  javaVersion: number;
  /** the folder of jars (the classpath is `<lib>/*`) */
  lib: string;
}

export interface RunningKafka {
  /** what SCALEGATE_KAFKA_BROKERS says: `127.0.0.1:<port>` */
  brokers: string;
  port: number;
  controllerPort: number;
  dataDir: string;
  /** the JVM's process id (a chaos run may pause it) */
  pid: number | null;
  /** how long the broker took from spawn to answering a metadata request */
  startedInMs: number;
  /** SIGTERM, SIGKILL after a bound; resolves once the JVM has exited */
  stop(): Promise<void>;
}

export function kafkaDir(): string {
  return path.join(cacheRoot(), `kafka-${KAFKA_VERSION}`);
}

export function kafkaLibDir(): string {
  return path.join(kafkaDir(), 'lib');
}

/** JAVA_HOME's java, else `java` on PATH, else null. */
export function findJava(): string | null {
  const home = process.env.JAVA_HOME;
  if (home) {
    const candidate = path.join(home, 'bin', 'java');
    if (fs.existsSync(candidate)) return candidate;
  }
  return onPath('java');
}

/** The major version of `java` (8 for "1.8.0_402", 17 for "17.0.15"), null when there is none or it does not answer. */
export function javaVersion(java: string | null = findJava()): number | null {
  if (!java) return null;
  if (!javaVersions.has(java)) javaVersions.set(java, askJavaVersion(java));
  return javaVersions.get(java) ?? null;
}

/** A binary's version does not change while we run: asked once per path. */
const javaVersions = new Map<string, number | null>();

function askJavaVersion(java: string): number | null {
  const result = spawnSync(java, ['-version'], { encoding: 'utf8', timeout: 30_000 });
  const match = /version "(\d+)(?:\.(\d+))?/.exec(`${result.stderr ?? ''}${result.stdout ?? ''}`);
  if (!match) return null;
  const major = Number(match[1]);
  return major === 1 ? Number(match[2]) : major;
}

/** The jars are in the cache (the staging rename is the last step, so a present broker jar means all of them). */
export function kafkaInstalled(): boolean {
  return fs.existsSync(path.join(kafkaLibDir(), BROKER_JAR));
}

/** Why the embedded broker cannot run here (no Java 17, or no jars and no mvn to fetch them), null when it can. */
export function kafkaUnavailable(): string | null {
  const version = javaVersion();
  if (version === null || version < MIN_JAVA) return `no Java ${MIN_JAVA}`;
  if (!kafkaInstalled() && !onPath('mvn')) return 'no mvn to fetch the Kafka jars';
  return null;
}

function checkJava(): { java: string; javaVersion: number } {
  const java = findJava();
  const version = javaVersion(java);
  if (!java || version === null) {
    throw new Error(`Kafka needs Java ${MIN_JAVA} or later and no \`java\` was found (JAVA_HOME, PATH): install one, e.g. apt-get install openjdk-17-jre-headless`);
  }
  if (version < MIN_JAVA) throw new Error(`Kafka needs Java ${MIN_JAVA} or later; ${java} is Java ${version} (set JAVA_HOME or PATH to a Java ${MIN_JAVA})`);
  return { java, javaVersion: version };
}

function pom(): string {
  const dependency = (d: typeof BROKER_ARTIFACT) =>
    `    <dependency><groupId>${d.groupId}</groupId><artifactId>${d.artifactId}</artifactId><version>${d.version}</version></dependency>`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!-- generated by scalegate (embedded/kafka.ts): the jars of the embedded Kafka broker -->',
    '<project xmlns="http://maven.apache.org/POM/4.0.0">',
    '  <modelVersion>4.0.0</modelVersion>',
    '  <groupId>scalegate</groupId>',
    '  <artifactId>embedded-kafka</artifactId>',
    `  <version>${KAFKA_VERSION}</version>`,
    '  <packaging>pom</packaging>',
    '  <dependencies>',
    dependency(BROKER_ARTIFACT),
    dependency(LOG_BINDING),
    '  </dependencies>',
    '</project>',
    '',
  ].join('\n');
}

/** Runs a command to its end; resolves with its exit code and the tail of its output. */
function run(command: string, args: string[], options: { cwd?: string; timeoutMs: number }): Promise<{ code: number | null; tail: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const keep = (chunk: Buffer) => {
      tail = (tail + chunk.toString()).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, tail: tail.trim() });
    });
  });
}

/** `[ERROR] ...` lines of Maven's output, else its last lines. */
function mavenError(tail: string): string {
  const lines = tail.split('\n').map((line) => line.replace(/\x1b\[[0-9;]*m/g, '').trim()).filter(Boolean);
  const errors = lines.filter((line) => line.startsWith('[ERROR]'));
  return (errors.length ? errors : lines).slice(0, 4).join(' ') || 'no output';
}

/**
 * Java ≥ 17 and the broker's jars in the cache, fetching them with mvn the first time. Idempotent;
 * concurrent callers each stage their own copy and the first rename wins. Throws, naming what is
 * missing, when Java is older or absent, or when the jars are not cached and mvn is absent or fails.
 */
export async function ensureKafka(log: (line: string) => void = () => {}): Promise<KafkaInstall> {
  const java = checkJava();
  if (kafkaInstalled()) return { ...java, lib: kafkaLibDir() };
  const mvn = onPath('mvn');
  if (!mvn) {
    throw new Error(`the Kafka ${KAFKA_VERSION} jars are not in ${kafkaLibDir()} and \`mvn\` is not on PATH to fetch them from Maven Central: install Maven (apt-get install maven)`);
  }
  const target = kafkaDir();
  const staging = `${target}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  fs.mkdirSync(staging, { recursive: true });
  try {
    fs.writeFileSync(path.join(staging, 'pom.xml'), pom());
    log(`fetching Kafka ${KAFKA_VERSION} (${BROKER_ARTIFACT.groupId}:${BROKER_ARTIFACT.artifactId} and its runtime dependencies) from Maven Central with mvn`);
    const started = Date.now();
    const result = await run(mvn, ['-q', '-B', '-f', path.join(staging, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${path.join(staging, 'lib')}`, '-DincludeScope=runtime'], {
      cwd: staging, timeoutMs: 900_000,
    });
    if (result.code !== 0 || !fs.existsSync(path.join(staging, 'lib', BROKER_JAR))) {
      throw new Error(`mvn could not fetch Kafka ${KAFKA_VERSION} from Maven Central (exit ${result.code}): ${mavenError(result.tail)}`);
    }
    try {
      fs.renameSync(staging, target);
    } catch (error) {
      if (!kafkaInstalled()) throw new Error(`could not move the Kafka jars into ${target}: ${(error as Error).message}`);
      // another process won the race: its copy is the same
    }
    const jars = fs.readdirSync(kafkaLibDir()).filter((f) => f.endsWith('.jar')).length;
    log(`Kafka ${KAFKA_VERSION}: ${jars} jars in ${kafkaLibDir()} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return { ...java, lib: kafkaLibDir() };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** The KRaft configuration of one node that is broker and controller, on loopback. */
export function serverProperties(options: { port: number; controllerPort: number; dataDir: string }): string {
  const settings: Record<string, string | number> = {
    'process.roles': 'broker,controller',
    'node.id': 1,
    'controller.quorum.voters': `1@127.0.0.1:${options.controllerPort}`,
    listeners: `PLAINTEXT://127.0.0.1:${options.port},CONTROLLER://127.0.0.1:${options.controllerPort}`,
    'advertised.listeners': `PLAINTEXT://127.0.0.1:${options.port}`,
    'controller.listener.names': 'CONTROLLER',
    'inter.broker.listener.name': 'PLAINTEXT',
    'listener.security.protocol.map': 'PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'log.dirs': options.dataDir,
    'offsets.topic.replication.factor': 1,
    'transaction.state.log.replication.factor': 1,
    'transaction.state.log.min.isr': 1,
    'group.initial.rebalance.delay.ms': 0,
    'num.partitions': 1,
    'auto.create.topics.enable': 'false',
  };
  return `# written by scalegate (embedded/kafka.ts) at every start\n${Object.entries(settings).map(([key, value]) => `${key}=${value}`).join('\n')}\n`;
}

/** Warnings and errors, and the line saying the server started, to the JVM's stdout (the log file). */
const LOG4J_CONFIG = [
  'status = warn',
  'appender.out.type = Console',
  'appender.out.name = out',
  'appender.out.layout.type = PatternLayout',
  'appender.out.layout.pattern = [%d] %p %m (%c)%n',
  'rootLogger.level = WARN',
  'rootLogger.appenderRef.out.ref = out',
  'logger.started.name = kafka.server.KafkaRaftServer',
  'logger.started.level = INFO',
  '',
].join('\n');

/** A Kafka cluster id: 16 random bytes, base64url without padding (22 characters, not starting with "-"). */
function newClusterId(): string {
  for (;;) {
    const id = crypto.randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** The cluster id `format` wrote into the data folder (null: not formatted yet). */
function formattedClusterId(dataDir: string): string | null {
  try {
    return /^cluster\.id=(.+)$/m.exec(fs.readFileSync(path.join(dataDir, 'meta.properties'), 'utf8'))?.[1]?.trim() ?? null;
  } catch {
    return null;
  }
}

class NotOurBroker extends Error {}

/** Until our broker (its cluster id) answers a metadata request with itself in the cluster. */
async function waitForBroker(brokers: string, clusterId: string, child: ChildProcess, logTail: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = 'no answer yet';
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the Kafka broker exited (${child.exitCode ?? child.signalCode}) during start: ${logTail()}`);
    }
    const admin = kafkaClient(brokers, 'scalegate-readiness', { connectionTimeout: 1_000, requestTimeout: 2_000, retry: { retries: 0 } }).admin();
    try {
      await admin.connect();
      const cluster = await admin.describeCluster();
      if (cluster.clusterId !== clusterId) throw new NotOurBroker(`${brokers} answers for cluster ${cluster.clusterId}, not ours (${clusterId}): is another broker on that port?`);
      if (cluster.brokers.length > 0) return;
      last = 'no broker registered yet';
    } catch (error) {
      if (error instanceof NotOurBroker) throw error;
      last = (error as Error).message;
    } finally {
      await admin.disconnect().catch(() => {});
    }
    if (Date.now() > deadline) throw new Error(`the Kafka broker on ${brokers} did not answer within ${READY_TIMEOUT_MS / 1000} s: ${last}; ${logTail()}`);
    await sleep(200);
  }
}

export interface StartKafkaOptions {
  /** the PLAINTEXT listener on 127.0.0.1 */
  port: number;
  /** the log dir (formatted on first use, kept across starts); the config files are written into it */
  dataDir: string;
  /** the controller's listener (default: a free port, taken anew at every start) */
  controllerPort?: number;
  /** where the JVM's output goes (default: kept only for error messages) */
  logFile?: string;
  /** a prepared ensureKafka() result (else it is called here) */
  install?: KafkaInstall;
  /** -Xmx in MB (default 512) */
  heapMb?: number;
  log?: (line: string) => void;
}

/**
 * Starts the broker on 127.0.0.1:<port> with its data in `dataDir` (formatted on first use, kept
 * across starts), the controller on another free port, and resolves once the broker answers a
 * metadata request. The JVM's output goes to `logFile` when given.
 */
export async function startKafka(options: StartKafkaOptions): Promise<RunningKafka> {
  const log = options.log ?? (() => {});
  const install = options.install ?? (await ensureKafka(log));
  const controllerPort = options.controllerPort ?? (await freePort());
  const dataDir = path.resolve(options.dataDir);
  fs.mkdirSync(dataDir, { recursive: true });
  const propertiesFile = path.join(dataDir, SERVER_PROPERTIES);
  const log4jFile = path.join(dataDir, LOG4J_PROPERTIES);
  fs.writeFileSync(propertiesFile, serverProperties({ port: options.port, controllerPort, dataDir }));
  fs.writeFileSync(log4jFile, LOG4J_CONFIG);
  // One broker on a small machine beside the control plane: the serial collector and C1 alone (no
  // C2 compilation) spend less of its CPU. Measured on a 2-core machine, two runs each: start 4.2 →
  // 2.4 s of CPU, idle 34 → 24 ms per second, 20,000 records produced and consumed 1.2 → 0.9 s.
  const jvm = (heap: number) => ['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', `-Xmx${heap}m`, '-Djava.awt.headless=true', `-Dlog4j2.configurationFile=${log4jFile}`, '-cp', path.join(install.lib, '*')];

  let clusterId = formattedClusterId(dataDir);
  if (!clusterId) {
    clusterId = newClusterId();
    const format = await run(install.java, [...jvm(256), 'kafka.tools.StorageTool', 'format', '--ignore-formatted', '-t', clusterId, '-c', propertiesFile], { timeoutMs: 120_000 });
    clusterId = formattedClusterId(dataDir);
    if (format.code !== 0 || !clusterId) throw new Error(`formatting the Kafka storage in ${dataDir} failed (exit ${format.code}): ${format.tail.split('\n').slice(-3).join(' ')}`);
  }

  const out = options.logFile ? fs.openSync(options.logFile, 'a') : null;
  const started = Date.now();
  const child = spawn(install.java, [...jvm(options.heapMb ?? 512), 'kafka.Kafka', propertiesFile], { cwd: dataDir, stdio: ['ignore', 'pipe', 'pipe'] });
  let logTail = '';
  const keep = (chunk: Buffer) => {
    logTail = (logTail + chunk.toString()).slice(-2000);
    if (out !== null) fs.writeSync(out, chunk);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.once('close', () => {
    if (out !== null) fs.closeSync(out); // after the last output ('exit' may come before it)
  });
  const brokers = `127.0.0.1:${options.port}`;
  const stop = () => stopChild(child, STOP_GRACE_MS);
  try {
    await waitForBroker(brokers, clusterId, child, () => logTail.trim().split('\n').slice(-5).join(' | '));
  } catch (error) {
    await stop();
    throw error;
  }
  const startedInMs = Date.now() - started;
  log(`Kafka ${KAFKA_VERSION} broker (KRaft, Java ${install.javaVersion}) on ${brokers}, ready in ${(startedInMs / 1000).toFixed(1)} s`);
  return { brokers, port: options.port, controllerPort, dataDir, pid: child.pid ?? null, startedInMs, stop };
}

/**
 * The broker when it can run here, else why not: `{ off: 'no Java 17' }`, `{ off: 'no mvn to fetch
 * the Kafka jars' }`, or mvn's failure to fetch them. A broker that can run but fails to start throws.
 */
export async function startKafkaIfAvailable(options: StartKafkaOptions): Promise<{ kafka: RunningKafka; off?: undefined } | { kafka?: undefined; off: string }> {
  const off = kafkaUnavailable();
  if (off) return { off };
  let install: KafkaInstall;
  try {
    install = await ensureKafka(options.log);
  } catch (error) {
    return { off: (error as Error).message };
  }
  return { kafka: await startKafka({ ...options, install }) };
}
