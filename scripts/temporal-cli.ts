// Provisions the pinned Temporal CLI (see embedded/temporal-cli.ts for where it comes from) and
// prints its path, source and version. Used by .ci/run.
import { execFileSync } from 'node:child_process';
import { findTemporalCli } from '../embedded/temporal-cli';

const cli = findTemporalCli((line) => console.error(`[temporal-cli] ${line}`));
if (!cli) {
  console.error('[temporal-cli] no Temporal CLI could be provisioned; the SDK download (internet) is the last resort');
  process.exit(1);
}
const version = execFileSync(cli.path, ['--version']).toString().trim();
console.log(`${cli.path}\t${cli.source}\t${version}`);
