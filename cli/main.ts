// The scalegate command line: a thin client of the HTTP API. Tokens come from the environment
// (SCALEGATE_OPERATOR_TOKEN / SCALEGATE_VIEWER_TOKEN) or the state folder's tokens.json.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { z } from 'zod';
import { describeIssues, LedgerQuerySchema, PlanRequestSchema, ScaleRequestSchema, WorkloadDefinitionSchema } from '../protocol';

const USAGE = `usage: scalegate <command> [options]

  state                                   runtimes, workloads, placements, unplaced, operations
  ledger [--workload W] [--kind K] [--limit N]
  workload put <name> --file def.json     define a workload (JSON body of PUT /v1/workloads/:name)
  workload get <name> | workload retire <name>
  plan <workload> <replicas>              plan a change (starts, stops, moves, warnings, basis)
  apply <planId>                          apply a plan
  scale <workload> <replicas> [--approval manual] [--reason TEXT] [--drain-timeout-ms N] [--per-instance-limit N]
  op <workflowId>                         one operation: status, phase, gates, plan, evidence
  approve <workflowId> | abort <workflowId>
  cordon <runtime> | uncordon <runtime> | recover <runtime>

  --api URL (default $SCALEGATE_API_URL or http://127.0.0.1:8080)`;

function token(role: 'operator' | 'viewer'): string {
  const fromEnv = role === 'operator' ? process.env.SCALEGATE_OPERATOR_TOKEN : process.env.SCALEGATE_VIEWER_TOKEN ?? process.env.SCALEGATE_OPERATOR_TOKEN;
  if (fromEnv) return fromEnv;
  const file = path.join(process.env.SCALEGATE_HOME ?? '.scalegate', 'tokens.json');
  try {
    return (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, string>)[role];
  } catch {
    throw new Error(`no ${role} token: set SCALEGATE_${role.toUpperCase()}_TOKEN or run from the folder where npm start keeps ${file}`);
  }
}

async function call(api: string, method: string, urlPath: string, role: 'operator' | 'viewer', body?: unknown) {
  const response = await fetch(`${api}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${token(role)}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  process.stdout.write(`${text}\n`);
  if (!response.ok) process.exitCode = 1;
}

const replicasArg = (value: string | undefined) => (value === 'all' ? 'all' : Number(value));
const numberArg = (value: string | undefined) => (value === undefined ? undefined : Number(value));

/** Builds a request body with the API's own schema, so a bad argument is refused here, naming the field. */
function body<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Error(`invalid arguments: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

async function main(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      api: { type: 'string' }, file: { type: 'string' }, workload: { type: 'string' }, kind: { type: 'string' },
      limit: { type: 'string' }, approval: { type: 'string' }, reason: { type: 'string' }, help: { type: 'boolean' },
      'drain-timeout-ms': { type: 'string' }, 'per-instance-limit': { type: 'string' },
    },
  });
  const api = values.api ?? process.env.SCALEGATE_API_URL ?? 'http://127.0.0.1:8080';
  const [command, a, b] = positionals;
  const id = encodeURIComponent(a ?? '');
  switch (command) {
    case 'state':
      return call(api, 'GET', '/v1/state', 'viewer');
    case 'ledger': {
      const filter = body(LedgerQuerySchema, { workload: values.workload, kind: values.kind, limit: values.limit });
      const query = new URLSearchParams(Object.entries(filter).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)] as [string, string]));
      return call(api, 'GET', `/v1/ledger?${query}`, 'viewer');
    }
    case 'workload': {
      const name = encodeURIComponent(b ?? '');
      if (a === 'put') {
        if (!values.file) throw new Error('workload put needs --file');
        return call(api, 'PUT', `/v1/workloads/${name}`, 'operator', body(WorkloadDefinitionSchema, JSON.parse(fs.readFileSync(values.file, 'utf8'))));
      }
      if (a === 'get') return call(api, 'GET', `/v1/workloads/${name}`, 'viewer');
      if (a === 'retire') return call(api, 'DELETE', `/v1/workloads/${name}`, 'operator');
      break;
    }
    case 'plan':
      return call(api, 'POST', `/v1/workloads/${id}/plan`, 'operator', body(PlanRequestSchema, { replicas: replicasArg(b) }));
    case 'apply':
      return call(api, 'POST', `/v1/plans/${id}/apply`, 'operator', {});
    case 'scale':
      return call(api, 'POST', `/v1/workloads/${id}/scale`, 'operator', body(ScaleRequestSchema, {
        replicas: replicasArg(b), approval: values.approval, reason: values.reason,
        drainTimeoutMs: numberArg(values['drain-timeout-ms']), perInstanceLimit: numberArg(values['per-instance-limit']),
      }));
    case 'op':
      return call(api, 'GET', `/v1/operations/${id}`, 'viewer');
    case 'approve':
    case 'abort':
      return call(api, 'POST', `/v1/operations/${id}/${command}`, 'operator', {});
    case 'cordon':
    case 'uncordon':
    case 'recover':
      return call(api, 'POST', `/v1/runtimes/${id}/${command}`, 'operator');
  }
  process.stderr.write(`${USAGE}\n`);
  process.exitCode = values.help ? 0 : 2;
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`scalegate: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
