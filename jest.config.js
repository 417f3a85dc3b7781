// Three projects (DESIGN.md §1, test layers):
//   unit       pure tests: no process, no port, no database, no file written. Needs nothing.
//   component  one real part (a driver with real processes and ports, the store on PostgreSQL).
//   system     workflow replays and integration tests on real Temporal, PostgreSQL and agents.
// component and system share one globalSetup (jest runs a given globalSetup file once per run;
// npm test's two runs, scripts/test.ts, share the servers it starts instead):
// one Temporal dev server and one PostgreSQL per run, started only when one of their tests is
// selected, so `jest test/unit` (npm run test:unit) starts nothing.
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] };
const sharedServers = {
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};
module.exports = {
  testTimeout: 180000,
  testSequencer: '<rootDir>/test/support/sequencer.js',
  projects: [
    { displayName: 'unit', testEnvironment: 'node', transform, testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { displayName: 'component', testEnvironment: 'node', transform, testMatch: ['<rootDir>/test/component/**/*.test.ts'], ...sharedServers },
    {
      displayName: 'system',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/{workflow,integration,e2e}/**/*.test.ts'],
      ...sharedServers,
    },
  ],
};
