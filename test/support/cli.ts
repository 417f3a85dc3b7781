// The scalegate CLI as a person runs it (`node cli/bin.js …` with the stack's URL and tokens in the
// environment, nothing else of the test's); never throws: the exit code, stdout and stderr.
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { Stack } from '../../harness/stack';

const BIN = path.resolve(__dirname, '../../cli/bin.js');

export function runCli(stack: Stack, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SCALEGATE_API_URL: stack.apiUrl, SCALEGATE_OPERATOR_TOKEN: stack.tokens.operator, SCALEGATE_VIEWER_TOKEN: stack.tokens.viewer },
    }, (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}
