// What `npm start`'s banner tells a shell (embedded/stack.ts): this stack's addresses, whatever
// ports overrides moved, for a plain `temporal` and for the README's commands.
import { shellExports, temporalCliLines } from '../../embedded/stack';
import type { TemporalCli } from '../../embedded/temporal-cli';

describe('the banner', () => {
  it('gives a plain temporal this stack\'s address (it dials 127.0.0.1:7233 otherwise), on the command, never exported', () => {
    const lines = temporalCliLines('127.0.0.1:17233', 'default', { path: '/cache/temporal-cli/temporal', source: 'cache' } satisfies TemporalCli);
    expect(lines).toEqual([
      expect.stringContaining('npx scalegate temporal workflow list'),
      '                 or put it on PATH: export PATH="/cache/temporal-cli:$PATH"',
      '                 plain temporal: TEMPORAL_ADDRESS=127.0.0.1:17233 temporal workflow list',
    ]);
    // already on PATH: no PATH line, the address all the same; another namespace is named too
    expect(temporalCliLines('127.0.0.1:7233', 'prod', { path: '/usr/bin/temporal', source: 'PATH' } satisfies TemporalCli)[1])
      .toBe('                 plain temporal: TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=prod temporal workflow list');
    expect(temporalCliLines('127.0.0.1:7233', 'default', null)).toEqual([]);
  });

  it('prints the exports the README\'s curl, CLI and loadgen lines read, with the ports this stack has', () => {
    expect(shellExports({ apiUrl: 'http://127.0.0.1:18080', home: '/srv/sg', databaseUrl: 'postgres://postgres:scalegate@127.0.0.1:15432/scalegate' }))
      .toBe("export SCALEGATE_API_URL=http://127.0.0.1:18080 SCALEGATE_HOME=/srv/sg PG='postgres://postgres:scalegate@127.0.0.1:15432/scalegate'");
  });
});
