// The scalegate CLI as a person runs it (`node cli/bin.js …` with the stack's URL and tokens in the
// environment, nothing else of the test's); never throws: the exit code, stdout and stderr.
import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import { findTemporalCli } from '../../embedded/temporal-cli';
import { testEnv } from '../../harness/env';
import type { Stack } from '../../harness/stack';

const BIN = path.resolve(__dirname, '../../cli/bin.js');

export function runCli(stack: Stack, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_API_URL: stack.apiUrl, SCALEGATE_OPERATOR_TOKEN: stack.tokens.operator, SCALEGATE_VIEWER_TOKEN: stack.tokens.viewer },
    }, (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

/** `temporal workflow cancel`, as an operator types it (the Web UI's Request Cancellation sends the same request). */
export function temporalCancel(workflowId: string): void {
  const cli = findTemporalCli();
  if (!cli) throw new Error('no temporal CLI: .ci/run provisions it (npx tsx scripts/temporal-cli.ts)');
  execFileSync(cli.path, ['workflow', 'cancel', '--workflow-id', workflowId, '--address', testEnv().temporalAddress, '--namespace', 'default'], { stdio: 'pipe' });
}
