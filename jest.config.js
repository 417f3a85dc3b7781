// Two projects: `unit` needs nothing; `system` (workflow, integration, e2e) shares one Temporal dev
// server and one PostgreSQL per run, started by its globalSetup only when one of its tests is selected.
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] };
module.exports = {
  testTimeout: 180000,
  projects: [
    { displayName: 'unit', testEnvironment: 'node', transform, testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      displayName: 'system',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/{workflow,integration,e2e}/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
