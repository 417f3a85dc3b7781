// The scalegate command line: a thin client of the HTTP API. Request bodies are built with the
// API's own schemas (protocol/), so a bad argument is refused here, naming the field. Answers are
// printed as tables by default, as the API's JSON with --json. An API error exits 1 with the
// server's message (on stderr; with --json its body on stdout too); a usage error exits 2.
// Tokens come from the environment (SCALEGATE_OPERATOR_TOKEN / SCALEGATE_VIEWER_TOKEN) or the
// state folder's tokens.json (what `npm start` writes).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { z } from 'zod';
import { AbortAnswerSchema, describeIssues, LedgerPageSchema, LedgerQuerySchema, OperationListQuerySchema, OperationListSchema, OperationReadQuerySchema, OperationViewSchema, PlanRequestSchema, PlanSchema, PutWorkloadAnswerSchema, RescaleRequestSchema, RolloutRequestSchema, RuntimeViewSchema, ScaleRequestSchema, ScaleStatusSchema, StartedOperationSchema, StateSchema, StreamJobListSchema, StreamJobViewSchema, WorkloadDefinitionSchema, WorkloadName, WorkloadViewSchema, type StartedOperation } from '../protocol';
import { TierListSchema, TierPolicyAnswerSchema, TierPolicySchema, TierSignalAnswerSchema, TierSignalSchema } from '../protocol/tiers';
import { OperationAnswerSchema, TierAnswerSchema, UnreadableAnswer } from './answers';

import { exitCodeOf, followOperation } from './watch';
import { readStackFile } from '../embedded/stack-file';
import { installedTemporalCli } from '../embedded/temporal-cli';
import { renderJob, renderJobList, renderLedger, renderOperation, renderOperationList, renderPlan, renderRuntime, renderStarted, renderState, renderTier, renderTierList, renderWorkload, renderWorkloadList, reportUrl } from './render';

export { renderJobList, renderOperation, renderOperationList, renderState, renderTierList, reportUrl, workloadCounts } from './render';

export const USAGE = `usage: scalegate <command> [options]

  state                                      runtimes, workloads, placements, unplaced, operations
  workloads list                             the workloads (from the state)
  workloads apply -f FILE                    define workloads from a YAML or JSON file: one definition
                                             with a "name", a list of them, or several YAML documents
  workloads get <name>                       a workload with its placement
  workloads retire <name>                    stop its tasks and empty its placement (a workflow)
  plan <workload> <replicas|all>             plan a change: starts, stops, moves, warnings, basis
  apply <planId> [--wait]                    apply a plan (a workflow)
  scale <workload> <replicas> [--approval auto|manual] [--reason TEXT] [--soak-ms N]
        [--converge-timeout-ms N] [--drain-timeout-ms N] [--per-instance-limit N] [--accept downstream]
        [--steps 1,50%,rest] [--force] [--wait]  (--steps: grow through these sizes, each compared before
                                             the next; a regression rolls back to the last good one)
                                             (--accept downstream: go on with an undeclared downstream
                                             instead of being refused; the gate row and ledger say so)
                                             (--force: a Kubernetes scale-in lowers the replicas even if
                                             a victim did not acknowledge its drain; the ledger says so)
  rollout <workload> [--batch-size N] [--soak-ms N] [--converge-timeout-ms N] [--reason TEXT] [--wait]
                                             roll the replicas not on the workload's current revision
                                             onto it: a canary step of one, then batches, each compared
                                             with the old revision (a PUT that changes what a replica
                                             runs starts one itself; this one resumes or retries)
  recover <runtime> [--wait]                 start the recovery of a runtime
  cordon <runtime> | uncordon <runtime>      take a runtime out of (or back into) placement
  operations list [--workload W] [--kind K] [--limit N]
                                             past and running runs, newest first: workflow id, run id,
                                             kind, status, start time (a start whose answer was lost shows)
  operations show <workflowId> [--run R]     status, phase, gates, plan, evidence, compensation (--run:
                                             that run of the id; default the newest)
  operations watch <workflowId> [--run R]    follow it (that run) to its end (as --wait does)
  operations report <workflowId> [--run R] [--out FILE]  save its evidence page (charts and verdicts,
                                             HTML with no external assets; default FILE
                                             scalegate-report-<workflowId>.html)
  operations approve <workflowId>            approve a scale-out waiting for manual approval
  operations abort <workflowId>              abort (after a change, the replan compensates)
  ledger [--workload W] [--kind K] [--limit N]   scale events, newest first
  jobs                                       every stream job: operators, subtasks desired, placed, ready
  jobs <job>                                 a stream job: operators, subtasks with their counters,
                                             last completed checkpoint, running operation
  rescale <job> <operator> <parallelism> [--reason TEXT] [--wait]
                                             rescale one operator: hot at a checkpoint barrier when it
                                             can (integer factor, keyed aggregate), else stop-the-world
  tiers | tiers list                         every tier with a policy: workloads, replicas, targets
  tiers show <tier>                          policy, latest observations, last decision, running operation
  tiers policy <tier> -f FILE                set a tier's autoscaler policy (YAML or JSON)
  tiers signal <tier> [--qps N] [--active-users N] [--cpu-utilization F] [--queue-depth N] [--at ISO]
                                             send a load observation to autoscale:<tier>
  temporal <args...>                         the Temporal CLI scalegate provisioned, pointed at the
                                             running stack's Temporal, e.g. scalegate temporal workflow list

  --wait       follow the operation it starts to its end: a line per step (gates, plan, tasks
               ready n/m, soak countdown, comparison), then the outcome and its reason; the
               default on a terminal (--no-wait: return at once). Exit code: 0 completed,
               1 failed, 3 refused, 4 compensated, 5 cancelled (2: a usage error)
  --json       print the API's JSON answer instead of tables
  --api URL    the API (default $SCALEGATE_API_URL, else the one npm start runs, from
               .scalegate/stack.json, else http://127.0.0.1:8080)
  -h, --help   this text

  (older spellings still work: workload put|get|retire, op, approve, abort)`;

type Role = 'operator' | 'viewer';

class UsageError extends Error {}

/** An answer the API refused: its status and body. */
class ApiRefusal extends Error {
  constructor(readonly status: number, readonly body: unknown) {
    const b = body as { error?: string; message?: string } | null;
    super(b && typeof b === 'object' && b.message ? `${b.error ?? status}: ${b.message}` : `HTTP ${status}: ${typeof body === 'string' ? body : JSON.stringify(body)}`);
  }
}

/** The state folder `npm start` keeps (tokens.json, stack.json). */
const stateHome = () => process.env.SCALEGATE_HOME ?? '.scalegate';

function token(role: Role): string {
  const fromEnv = role === 'operator' ? process.env.SCALEGATE_OPERATOR_TOKEN : process.env.SCALEGATE_VIEWER_TOKEN ?? process.env.SCALEGATE_OPERATOR_TOKEN;
  if (fromEnv) return fromEnv;
  const file = path.join(stateHome(), 'tokens.json');
  let stored: Record<string, string>;
  try {
    stored = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, string>;
  } catch {
    throw new UsageError(`no ${role} token: set SCALEGATE_${role.toUpperCase()}_TOKEN or run from the folder where npm start keeps ${file}`);
  }
  const found = stored[role] ?? (role === 'viewer' ? stored.operator : undefined);
  if (!found) throw new UsageError(`no ${role} token in ${file}`);
  return found;
}

/** How long a call waits without a word before it says what it waits for (on stderr). */
export const WAIT_NOTICE_MS = 3_000;
/** How long a call waits for an answer at most: past the API's longest route deadline (60 s, an approval). */
const DEFAULT_TIMEOUT_MS = 70_000;

/** Why a call got no answer, in words: a stopped API refuses at once, a hung one never answers. */
export function unreachableMessage(api: string, error: unknown, timeoutMs: number): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const hint = '(is npm start running? --api or SCALEGATE_API_URL names another API)';
  if ((error as Error).name === 'TimeoutError') return `no answer from the scalegate API at ${api} within ${Math.round(timeoutMs / 1000)} s ${hint}`;
  if (cause?.code === 'ECONNREFUSED') return `cannot reach the scalegate API at ${api}: connection refused ${hint}`;
  return `cannot reach the scalegate API at ${api}: ${cause?.message ?? (error as Error).message} ${hint}`;
}

/** An answer as it came (`json`, what --json prints) and parsed with the schema of its route's answer (`value`, what is rendered). */
interface Answer<T> {
  value: T;
  json: unknown;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * `parsed` with the fields of each object in the order of `raw`, the answer it was parsed from
 * (parsing orders them as the schema does): a renderer that lists an object's fields (a workload's
 * contract, a tier's targets) lists them as the API answered. Fields the schema added (defaults) follow.
 */
function inAnswerOrder<T>(parsed: T, raw: unknown): T {
  if (Array.isArray(parsed)) return (Array.isArray(raw) ? parsed.map((item, i) => inAnswerOrder(item, raw[i])) : parsed) as T;
  if (!isRecord(parsed) || !isRecord(raw)) return parsed;
  const ordered: Record<string, unknown> = {};
  for (const key of Object.keys(raw)) if (Object.hasOwn(parsed, key)) ordered[key] = inAnswerOrder(parsed[key], raw[key]);
  for (const key of Object.keys(parsed)) if (!Object.hasOwn(ordered, key)) ordered[key] = parsed[key];
  return ordered as T;
}

function client(api: string, say: (line: string) => void) {
  const timeoutMs = Number(process.env.SCALEGATE_CLI_TIMEOUT_MS) || DEFAULT_TIMEOUT_MS;
  /** Calls the API and parses its answer with `schema`, the one its route declares (protocol/). */
  return async <S extends z.ZodType>(method: string, urlPath: string, role: Role, schema: S, body?: unknown): Promise<Answer<z.output<S>>> => {
    let response: Response;
    // A call that gets no answer (an API stopped with SIGSTOP, a host that drops packets) says so
    // within seconds, and gives up after timeoutMs with a message: never a silent hang.
    const notice = setTimeout(() => say(`scalegate: waiting for the scalegate API at ${api} (no answer after ${WAIT_NOTICE_MS / 1000} s; giving up after ${Math.round(timeoutMs / 1000)} s, SCALEGATE_CLI_TIMEOUT_MS)`), WAIT_NOTICE_MS);
    try {
      response = await fetch(`${api}${urlPath}`, {
        method,
        headers: { authorization: `Bearer ${token(role)}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new Error(unreachableMessage(api, error, timeoutMs));
    } finally {
      clearTimeout(notice);
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    if (!response.ok) throw new ApiRefusal(response.status, parsed);
    const read = schema.safeParse(parsed);
    if (!read.success) throw new UnreadableAnswer(`${method} ${urlPath}`, api, read.error);
    return { value: inAnswerOrder(read.data, parsed), json: parsed };
  };
}

/** Builds a request body with the API's own schema, so a bad argument is refused here, naming the field. */
function body<T extends z.ZodType>(schema: T, value: unknown, what = 'arguments'): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new UsageError(`invalid ${what}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

const replicasArg = (value: string | undefined) => (value === undefined ? undefined : value === 'all' ? 'all' : Number(value));
const numberArg = (value: string | undefined) => (value === undefined ? undefined : Number(value));
const need = (value: string | undefined, what: string): string => {
  if (!value) throw new UsageError(`missing ${what}`);
  return value;
};
const enc = encodeURIComponent;

/** The documents of a YAML or JSON file (YAML is a superset of JSON: one parser reads both). */
function parseFile(file: string): unknown[] {
  let source: string;
  try {
    source = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  let documents: unknown[];
  try {
    documents = YAML.parseAllDocuments(source).map((doc) => {
      if (doc.errors.length) throw new Error(doc.errors[0].message);
      return doc.toJS();
    });
  } catch (error) {
    throw new UsageError(`${file} is neither YAML nor JSON: ${(error as Error).message}`);
  }
  const items = documents.flatMap((doc) => (Array.isArray(doc) ? doc : doc === null || doc === undefined ? [] : [doc]));
  if (items.length === 0) throw new UsageError(`${file} holds no workload definition`);
  return items;
}

/** One definition without a name (the older `workload put <name> --file F`). */
function readDefinition(file: string): unknown {
  return body(WorkloadDefinitionSchema, parseFile(file)[0], `workload in ${file}`);
}

/** The workload definitions a file holds: one (with "name"), a list, or several YAML documents. */
export function readDefinitions(file: string): { name: string; definition: unknown }[] {
  const items = parseFile(file);
  return items.map((item, i) => {
    const where = items.length > 1 ? `${file} definition ${i + 1}` : file;
    if (!item || typeof item !== 'object') throw new UsageError(`${where}: a workload definition is an object`);
    const { name, ...definition } = item as Record<string, unknown>;
    const parsedName = WorkloadName.safeParse(name);
    if (!parsedName.success) throw new UsageError(`${where}: "name" ${name === undefined ? 'is missing' : `is invalid: ${describeIssues(parsedName.error)}`}`);
    return { name: parsedName.data, definition: body(WorkloadDefinitionSchema, definition, `workload ${parsedName.data} in ${where}`) };
  });
}

// ---------------------------------------------------------------------------------------------
/**
 * `scalegate temporal ...`: the Temporal CLI scalegate provisioned, pointed at the running stack's
 * Temporal (stack.json; TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE win), its arguments as they are.
 */
async function runTemporal(args: string[]): Promise<void> {
  const cli = installedTemporalCli();
  if (!cli) throw new UsageError('the Temporal CLI is not installed here: `npx tsx scripts/temporal-cli.ts` provisions it (npm start and .ci/run do too)');
  const stack = readStackFile(stateHome());
  const env = {
    ...process.env,
    ...(process.env.TEMPORAL_ADDRESS || !stack ? {} : { TEMPORAL_ADDRESS: stack.temporalAddress }),
    ...(process.env.TEMPORAL_NAMESPACE || !stack ? {} : { TEMPORAL_NAMESPACE: stack.namespace }),
  };
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(cli.path, args, { stdio: 'inherit', env });
    child.once('error', reject);
    child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 + (osConstants.signals[signal] ?? 0) : 1)));
  });
  process.exitCode = code;
}

export async function run(argv: string[], out: (text: string) => void = (t) => process.stdout.write(`${t}\n`)): Promise<void> {
  // Everything after `temporal` is the Temporal CLI's own arguments: not parsed here.
  if (argv[0] === 'temporal') return runTemporal(argv.slice(1));
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      api: { type: 'string' }, file: { type: 'string', short: 'f' }, workload: { type: 'string' }, kind: { type: 'string' },
      limit: { type: 'string' }, run: { type: 'string' }, approval: { type: 'string' }, reason: { type: 'string' }, help: { type: 'boolean', short: 'h' },
      json: { type: 'boolean' }, wait: { type: 'boolean' }, 'no-wait': { type: 'boolean' }, 'soak-ms': { type: 'string' }, 'converge-timeout-ms': { type: 'string' },
      'drain-timeout-ms': { type: 'string' }, 'per-instance-limit': { type: 'string' }, 'batch-size': { type: 'string' }, out: { type: 'string', short: 'o' }, accept: { type: 'string', multiple: true }, steps: { type: 'string' }, force: { type: 'boolean' },
      qps: { type: 'string' }, 'active-users': { type: 'string' }, 'cpu-utilization': { type: 'string' }, 'queue-depth': { type: 'string' }, at: { type: 'string' },
    },
  });
  if (values.help || positionals.length === 0) {
    out(USAGE);
    if (!values.help) process.exitCode = 2;
    return;
  }
  const api = (values.api ?? process.env.SCALEGATE_API_URL ?? readStackFile(stateHome())?.apiUrl ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const call = client(api, (line) => process.stderr.write(`${line}\n`));
  // --json prints the answer as it came (parsing orders its fields by the schema and drops those it does not name).
  const show = <T>(answer: Answer<T>, render: (value: T) => string) => out(values.json ? JSON.stringify(answer.json, null, 2) : render(answer.value));
  // A start is followed to its end with --wait, and by default on a terminal (not with --json).
  const wait = values['no-wait'] ? false : values.wait ?? (Boolean(process.stdout.isTTY) && !values.json);
  const follow = async (workflowId: string, runId?: string) => {
    let endedJson: unknown = null;
    const ended = await followOperation(workflowId, {
      runId,
      get: async (urlPath, schema) => {
        const answer = await call('GET', urlPath, 'viewer', schema);
        // the operation's view as it came: the last one read is the final view --json prints
        if ((schema as z.ZodType) === OperationAnswerSchema) endedJson = answer.json;
        return answer.value;
      },
      // With --json only the final view is printed.
      write: values.json ? () => {} : (text) => process.stdout.isTTY ? process.stdout.write(text) : out(text.replace(/\n$/, '')),
      tty: Boolean(process.stdout.isTTY) && !values.json,
    });
    if (values.json) out(JSON.stringify(endedJson, null, 2));
    process.exitCode = exitCodeOf(ended.status);
  };
  const started = async (what: string, answer: Answer<StartedOperation>) => {
    const s = answer.value;
    if (!s.workflowId) return show(answer, () => JSON.stringify(answer.json, null, 2));
    if (!wait) return show(answer, (value) => renderStarted(what, value, api));
    if (!values.json) out(`${what} ${s.kind} ${s.workflowId} (web ui: ${s.uiUrl})`);
    return follow(s.workflowId, s.runId);
  };
  /** --workload, --kind and --limit, checked by a list route's query schema, as a query string */
  const filterQuery = (schema: z.ZodType<Record<string, unknown>>) => {
    const filter = body(schema, { workload: values.workload, kind: values.kind, limit: values.limit });
    return new URLSearchParams(Object.entries(filter).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)] as [string, string]));
  };
  let [command, sub, a] = positionals;

  // Older spellings: `workload put <name> --file F|get|retire`, `op`, `approve`, `abort`.
  const legacyPut = command === 'workload' && sub === 'put';
  if (command === 'workload') command = 'workloads';
  if (legacyPut) sub = 'apply';
  if (command === 'op') [command, sub, a] = ['operations', 'show', sub];
  if (command === 'approve' || command === 'abort') [command, sub, a] = ['operations', command, sub];

  switch (command) {
    case 'state':
      return show(await call('GET', '/v1/state', 'viewer', StateSchema), renderState);
    case 'ledger':
      return show(await call('GET', `/v1/ledger?${filterQuery(LedgerQuerySchema)}`, 'viewer', LedgerPageSchema), (page) => renderLedger(page.events));
    case 'workloads':
      switch (sub) {
        case 'list':
          return show(await call('GET', '/v1/state', 'viewer', StateSchema), renderWorkloadList);
        case 'apply': {
          const file = need(values.file, 'the file: workloads apply -f FILE');
          // `workload put <name> --file F` names the workload on the command line, not in the file.
          const definitions = legacyPut ? [{ name: need(a, 'the workload name'), definition: readDefinition(file) }] : readDefinitions(file);
          const answers: unknown[] = [];
          for (const { name, definition } of definitions) {
            const answer = await call('PUT', `/v1/workloads/${enc(name)}`, 'operator', PutWorkloadAnswerSchema, definition);
            answers.push(answer.json);
            const put = answer.value;
            // What a replica runs changed: the PUT started a rollout (202), followed like any start.
            if ('workflowId' in put) {
              if (values.json) continue;
              out(`workload ${name}: what a replica runs changed (${put.revision.from} → ${put.revision.to}); rollout ${put.workflowId} started (web ui: ${put.uiUrl})`);
              if (wait) await follow(put.workflowId, put.runId);
              continue;
            }
            if (!values.json) out(`workload ${name} ${put.revision !== undefined ? `saved at revision ${put.revision}` : 'saved'} (${put.kind}, replicas ${put.replicas})`);
          }
          if (values.json) out(JSON.stringify(answers.length === 1 ? answers[0] : answers, null, 2));
          return;
        }
        case 'get':
          return show(await call('GET', `/v1/workloads/${enc(need(a, 'the workload name'))}`, 'viewer', WorkloadViewSchema), renderWorkload);
        case 'retire':
          return show(await call('DELETE', `/v1/workloads/${enc(need(a, 'the workload name'))}`, 'operator', StartedOperationSchema), (s) => renderStarted('retiring', s, api));
      }
      break;
    case 'plan': {
      const request = body(PlanRequestSchema, { replicas: replicasArg(need(a, 'the replicas: plan <workload> <replicas>')) });
      return show(await call('POST', `/v1/workloads/${enc(need(sub, 'the workload name'))}/plan`, 'operator', PlanSchema, request), renderPlan);
    }
    case 'apply':
      return started('applying', await call('POST', `/v1/plans/${enc(need(sub, 'the plan id'))}/apply`, 'operator', StartedOperationSchema, {}));
    case 'scale': {
      const request = body(ScaleRequestSchema, {
        replicas: replicasArg(need(a, 'the replicas: scale <workload> <replicas>')), approval: values.approval, reason: values.reason,
        soakMs: numberArg(values['soak-ms']), convergeTimeoutMs: numberArg(values['converge-timeout-ms']),
        drainTimeoutMs: numberArg(values['drain-timeout-ms']), perInstanceLimit: numberArg(values['per-instance-limit']), accept: values.accept, force: values.force,
        steps: values.steps?.split(',').map((step) => (/^\d+$/.test(step.trim()) ? Number(step) : step.trim())),
      });
      return started('started', await call('POST', `/v1/workloads/${enc(need(sub, 'the workload name'))}/scale`, 'operator', StartedOperationSchema, request));
    }
    case 'rollout': {
      const request = body(RolloutRequestSchema, {
        batchSize: numberArg(values['batch-size']), soakMs: numberArg(values['soak-ms']), convergeTimeoutMs: numberArg(values['converge-timeout-ms']), reason: values.reason,
      });
      return started('started', await call('POST', `/v1/workloads/${enc(need(sub, 'the workload name'))}/rollout`, 'operator', StartedOperationSchema, request));
    }
    case 'operations': {
      if (sub === 'list') return show(await call('GET', `/v1/operations?${filterQuery(OperationListQuerySchema)}`, 'viewer', OperationListSchema), (list) => renderOperationList(list.operations));
      const id = enc(need(a, 'the workflow id, e.g. scale:orders'));
      // --run: that run of the id (checked as the API checks it), else the newest
      const runId = values.run === undefined ? undefined : body(OperationReadQuerySchema, { runId: values.run }).runId;
      const run = runId ? `?runId=${encodeURIComponent(runId)}` : '';
      if (sub === 'show') return show(await call('GET', `/v1/operations/${id}${run}`, 'viewer', OperationAnswerSchema), (o) => renderOperation(o, api));
      if (sub === 'report') {
        // the run is named (the newest when --run is not given), and so is the link printed
        const shown = (await call('GET', `/v1/operations/${id}${run}`, 'viewer', OperationViewSchema)).value.runId;
        const html = (await call('GET', `/v1/operations/${id}/report?runId=${encodeURIComponent(shown)}`, 'viewer', z.string())).value;
        const file = values.out ?? `scalegate-report-${need(a, 'the workflow id').replace(/[^A-Za-z0-9._-]+/g, '_')}.html`;
        fs.writeFileSync(file, html);
        return out(`report of ${a} (run ${shown}) written to ${file} (${Buffer.byteLength(html)} bytes); served at ${reportUrl(api, need(a, 'the workflow id'), shown)}`);
      }
      if (sub === 'watch') return follow(need(a, 'the workflow id'), runId);
      if (sub === 'approve') {
        return show(await call('POST', `/v1/operations/${id}/approve`, 'operator', ScaleStatusSchema, {}), (s) => `approved ${a}: phase ${s.phase}, approval ${s.approval?.decision} by ${s.approval?.by}`);
      }
      if (sub === 'abort') return show(await call('POST', `/v1/operations/${id}/abort`, 'operator', AbortAnswerSchema, {}), () => `abort requested for ${a}: it stops, and a change already made is compensated by the replan`);
      break;
    }
    case 'rescale': {
      const [operator, parallelism] = [a, positionals[3]];
      const request = body(RescaleRequestSchema, { parallelism: numberArg(need(parallelism, 'the parallelism: rescale <job> <operator> <parallelism>')), reason: values.reason });
      const path = `/v1/jobs/${enc(need(sub, 'the job: rescale <job> <operator> <parallelism>'))}/operators/${enc(need(operator, 'the operator'))}/rescale`;
      return started('rescaling', await call('POST', path, 'operator', StartedOperationSchema, request));
    }
    case 'jobs':
      if (sub === undefined) return show(await call('GET', '/v1/jobs', 'viewer', StreamJobListSchema), renderJobList);
      return show(await call('GET', `/v1/jobs/${enc(sub)}`, 'viewer', StreamJobViewSchema), renderJob);
    case 'tiers': {
      if (sub === undefined || sub === 'list') return show(await call('GET', '/v1/tiers', 'viewer', TierListSchema), renderTierList);
      const tier = enc(need(a, `the tier: tiers ${sub} <tier>`));
      if (sub === 'show') return show(await call('GET', `/v1/tiers/${tier}`, 'viewer', TierAnswerSchema), renderTier);
      if (sub === 'policy') {
        const file = need(values.file, 'the file: tiers policy <tier> -f FILE');
        const policy = body(TierPolicySchema, parseFile(file)[0], `policy in ${file}`);
        return show(await call('PUT', `/v1/tiers/${tier}/policy`, 'operator', TierPolicyAnswerSchema, policy), (p) => `tier ${p.tier}: policy saved at revision ${p.revision} (workloads ${p.policy.workloads.join(', ')}; ${p.workflowId} signalled)`);
      }
      if (sub === 'signal') {
        const observation = body(TierSignalSchema, {
          qps: numberArg(values.qps), activeUsers: numberArg(values['active-users']), cpuUtilization: numberArg(values['cpu-utilization']),
          queueDepth: numberArg(values['queue-depth']), at: values.at,
        });
        return show(await call('POST', `/v1/tiers/${tier}/signals`, 'operator', TierSignalAnswerSchema, observation), (s) => `observation sent to ${s.workflowId}`);
      }
      break;
    }
    case 'cordon':
    case 'uncordon':
      return show(await call('POST', `/v1/runtimes/${enc(need(sub, 'the runtime id'))}/${command}`, 'operator', RuntimeViewSchema), renderRuntime);
    case 'recover':
      return started('recovering', await call('POST', `/v1/runtimes/${enc(need(sub, 'the runtime id'))}/recover`, 'operator', StartedOperationSchema));
  }
  throw new UsageError(`unknown command: ${positionals.join(' ')}`);
}

/**
 * The command line's entry: cli/bin.js calls it (so it runs however the bin is reached: `npx
 * scalegate`, `npm exec scalegate`, a linked `scalegate`, `node cli/bin.js`), and so does
 * `tsx cli/main.ts`. Importing this module runs nothing.
 */
export function main(): void {
  const json = process.argv.includes('--json');
  run(process.argv.slice(2)).catch((error) => {
    if (error instanceof ApiRefusal) {
      if (json) process.stdout.write(`${typeof error.body === 'string' ? error.body : JSON.stringify(error.body, null, 2)}\n`);
      process.stderr.write(`scalegate: ${error.message}\n`);
      process.exitCode = 1;
    } else if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`scalegate: ${(error as Error).message}\n(scalegate --help for the commands)\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`scalegate: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    }
  });
}

if (require.main === module) main();
