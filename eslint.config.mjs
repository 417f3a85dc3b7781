// Lint: TypeScript rules, plus the rule that keeps I/O out of workflows/ (they must be deterministic:
// only @temporalio/workflow, zod and domain/ may be imported; activities only as types).
import tseslint from 'typescript-eslint';

const ioModules = ['pg', 'node:*', 'fs', 'http', 'https', 'net', 'child_process', 'crypto', 'os', 'path', 'fastify', 'undici', 'axios',
  '@temporalio/client', '@temporalio/worker', '@temporalio/activity'];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.scalegate/**', 'coverage/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['workflows/**/*.ts', 'domain/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [
          { group: ioModules, message: 'workflows/ and domain/ are deterministic: no I/O imports' },
          { group: ['../activities', '../activities/*', '../store/*', '../api/*', '../agent/*'], allowTypeImports: true,
            message: 'workflows/ take activities as types only (proxyActivities)' },
        ],
      }],
    },
  },
  { files: ['cli/bin.js', 'test/fixtures/**/*.js'], languageOptions: { globals: { require: 'readonly', process: 'readonly', __dirname: 'readonly', console: 'readonly', setTimeout: 'readonly' } }, rules: { '@typescript-eslint/no-require-imports': 'off' } },
);
