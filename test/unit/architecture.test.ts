// The import picture of DESIGN.md §1 and docs/architecture.md, checked on the source text.
//
// Pure: it reads the .ts files of the project folders and parses their imports with the
// TypeScript parser; it runs nothing, opens no port and bundles nothing. Each rule collects every
// violation as "file → import" so a failure names all of them at once.
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '../..');
/** The project folders of DESIGN.md §1. */
const LAYOUT = ['api', 'workflows', 'activities', 'workers', 'domain', 'protocol', 'http', 'lib', 'store', 'agent', 'cli', 'scripts'];
/** Harnesses: checked only for the scripts/ rule (they test and measure the parts, they are none). */
const HARNESSES = ['test', 'harness', 'bench'];
/** The layout plus any other top-level folder holding .ts files (e.g. embedded/), so a new folder is not skipped. */
const FOLDERS = [
  ...LAYOUT,
  ...fs
    .readdirSync(ROOT, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.') && entry.name !== 'node_modules')
    .map((entry) => entry.name)
    .filter((name) => !LAYOUT.includes(name) && !HARNESSES.includes(name) && listTsFiles(path.join(ROOT, name)).length > 0),
];
type Folder = string;

/** What a workflow may load at run time: the Temporal sandbox has no node built-ins and no I/O. */
const WORKFLOW_PACKAGES = ['@temporalio/workflow', '@temporalio/common', 'zod'];
const PROTOCOL_PACKAGES = ['zod', '@temporalio/common'];

interface Import {
  /** the specifier as written */
  specifier: string;
  /** erased at compile time: `import type`, `export type`, or only `type` specifiers */
  typeOnly: boolean;
  /** repo-relative path of the project file it resolves to; undefined for a package or built-in */
  target?: string;
}

interface SourceFile {
  /** repo-relative, forward slashes */
  file: string;
  folder: Folder;
  imports: Import[];
}

function listTsFiles(directory: string): string[] {
  if (!fs.existsSync(directory)) return [];
  return fs.readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : listTsFiles(full);
    return entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

const toRepoPath = (absolute: string): string => path.relative(ROOT, absolute).split(path.sep).join('/');

/** Resolve a relative specifier the way CommonJS + TypeScript would; undefined when it is a package. */
function resolveRelative(fromFile: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(ROOT, path.dirname(fromFile), specifier);
  for (const candidate of [`${base}.ts`, path.join(base, 'index.ts'), base]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return toRepoPath(candidate);
  }
  return toRepoPath(base); // unresolvable: still attribute it to a folder
}

function parseImports(file: string): Import[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const found: Import[] = [];
  const add = (specifier: string, typeOnly: boolean): void => {
    found.push({ specifier, typeOnly, target: resolveRelative(file, specifier) });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      let typeOnly = clause?.isTypeOnly ?? false;
      if (clause && !typeOnly && !clause.name && clause.namedBindings && ts.isNamedImports(clause.namedBindings)) {
        const elements = clause.namedBindings.elements;
        typeOnly = elements.length > 0 && elements.every((element) => element.isTypeOnly);
      }
      add(node.moduleSpecifier.text, typeOnly);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      let typeOnly = node.isTypeOnly;
      if (!typeOnly && node.exportClause && ts.isNamedExports(node.exportClause)) {
        const elements = node.exportClause.elements;
        typeOnly = elements.length > 0 && elements.every((element) => element.isTypeOnly);
      }
      add(node.moduleSpecifier.text, typeOnly);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      add(node.moduleReference.expression.text, node.isTypeOnly);
    } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0])) {
      const isDynamicImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === 'require';
      // require.resolve('../workflows') hands a path to the bundler: the worker depends on it.
      const isRequireResolve =
        ts.isPropertyAccessExpression(node.expression) &&
        ts.isIdentifier(node.expression.expression) &&
        node.expression.expression.text === 'require' &&
        node.expression.name.text === 'resolve';
      if (isDynamicImport || isRequire || isRequireResolve) add(node.arguments[0].text, false);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, true); // `import('x').T` in a type position
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function folderOf(repoPath: string | undefined): string | undefined {
  return repoPath?.split('/')[0];
}

const NODE_BUILTINS = new Set(builtinModules);
function isNodeBuiltin(specifier: string): boolean {
  if (specifier.startsWith('node:')) return true;
  return NODE_BUILTINS.has(specifier) || NODE_BUILTINS.has(specifier.split('/')[0]);
}

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const readFolder = (folder: Folder): SourceFile[] =>
  listTsFiles(path.join(ROOT, folder)).map((absolute): SourceFile => {
    const file = toRepoPath(absolute);
    return { file, folder, imports: parseImports(file) };
  });
const files: SourceFile[] = FOLDERS.flatMap(readFolder);
const harnessFiles: SourceFile[] = HARNESSES.flatMap(readFolder);
const byFile = new Map(files.map((source) => [source.file, source]));

/** Every `file → specifier` of `folder` for which `isViolation` holds. */
function violations(folder: Folder, isViolation: (imported: Import, source: SourceFile) => boolean): string[] {
  return [...files, ...harnessFiles]
    .filter((source) => source.folder === folder)
    .flatMap((source) =>
      source.imports
        .filter((imported) => isViolation(imported, source))
        .map((imported) => `${source.file} → ${imported.specifier}${imported.typeOnly ? ' (type)' : ''}`),
    );
}

/** Imports of other project folders (not the file's own folder) outside `allowed`. */
const projectFolderOutside = (allowed: readonly string[]) => (imported: Import, source: SourceFile): boolean => {
  const folder = folderOf(imported.target);
  return folder !== undefined && folder !== source.folder && !allowed.includes(folder);
};

describe('architecture: the import picture', () => {
  it('finds the source files and their imports', () => {
    for (const folder of ['api', 'workflows', 'activities', 'domain', 'protocol', 'store', 'agent'] as const) {
      expect(files.some((source) => source.folder === folder)).toBe(true);
    }
    expect(files.reduce((count, source) => count + source.imports.length, 0)).toBeGreaterThan(100);
    // The parser tells erased imports from loaded ones.
    const workflowImports = files.filter((source) => source.folder === 'workflows').flatMap((source) => source.imports);
    expect(workflowImports.some((imported) => imported.specifier === '../activities' && imported.typeOnly)).toBe(true);
    expect(workflowImports.some((imported) => imported.specifier === '@temporalio/workflow' && !imported.typeOnly)).toBe(true);
  });

  it('domain/ imports no other project folder than protocol/', () => {
    expect(violations('domain', projectFolderOutside(['protocol']))).toEqual([]);
  });

  it('protocol/ imports nothing but zod, @temporalio/common and itself', () => {
    expect(
      violations('protocol', (imported) =>
        imported.target !== undefined ? folderOf(imported.target) !== 'protocol' : !PROTOCOL_PACKAGES.includes(packageName(imported.specifier)),
      ),
    ).toEqual([]);
  });

  it('store/ imports only domain/, protocol/, lib/ and store/', () => {
    expect(violations('store', projectFolderOutside(['domain', 'protocol', 'lib']))).toEqual([]);
  });

  it('lib/ imports no project folder (it is plumbing the control plane and the agents share)', () => {
    expect(violations('lib', projectFolderOutside([]))).toEqual([]);
  });

  it('api/ imports nothing from activities/ (HTTP only translates: the work is in the workflows)', () => {
    expect(violations('api', (imported) => folderOf(imported.target) === 'activities')).toEqual([]);
  });

  it('activities/ import neither api/, workers/, agent/ nor scripts/', () => {
    expect(violations('activities', (imported) => ['api', 'workers', 'agent', 'scripts'].includes(folderOf(imported.target) ?? ''))).toEqual([]);
  });

  it('workflows/ import only domain/, protocol/, workflows/ and the workflow packages; activities/ as types only', () => {
    expect(
      violations('workflows', (imported) => {
        if (imported.target === undefined) return !WORKFLOW_PACKAGES.includes(packageName(imported.specifier));
        const folder = folderOf(imported.target);
        if (folder === 'activities') return !imported.typeOnly;
        return !['domain', 'protocol', 'workflows'].includes(folder ?? '');
      }),
    ).toEqual([]);
  });

  it('nothing a workflow loads at run time reaches a node built-in or an I/O package (the sandbox has neither)', () => {
    // Follow runtime imports only (type imports are erased before bundling) from every workflow
    // file through the project files it loads: domain/placement.ts uses node:crypto, so a
    // workflow may take its types but never its values, directly or through another module.
    const offending: string[] = [];
    for (const start of files.filter((source) => source.folder === 'workflows')) {
      const chain = new Map<string, string>([[start.file, start.file]]);
      const queue = [start.file];
      while (queue.length > 0) {
        const current = byFile.get(queue.shift() as string);
        if (!current) continue;
        for (const imported of current.imports) {
          if (imported.typeOnly) continue;
          const via = `${chain.get(current.file)} → ${imported.specifier}`;
          if (imported.target === undefined) {
            if (isNodeBuiltin(imported.specifier) || !WORKFLOW_PACKAGES.includes(packageName(imported.specifier))) offending.push(via);
          } else if (!chain.has(imported.target)) {
            chain.set(imported.target, via);
            queue.push(imported.target);
          }
        }
      }
    }
    expect([...new Set(offending)]).toEqual([]);
  });

  it('agent/ imports neither api/, store/, activities/ nor workflows/', () => {
    expect(violations('agent', (imported) => ['api', 'store', 'activities', 'workflows'].includes(folderOf(imported.target) ?? ''))).toEqual([]);
  });

  it('http/ imports only protocol/ (and itself)', () => {
    expect(violations('http', projectFolderOutside(['protocol']))).toEqual([]);
  });

  it('no folder but scripts/ imports scripts/ (tests and benches included: a script is an entry point, not a library)', () => {
    const offending = [...FOLDERS, ...HARNESSES].filter((folder) => folder !== 'scripts').flatMap((folder) =>
      violations(folder, (imported) => folderOf(imported.target) === 'scripts'),
    );
    expect(offending).toEqual([]);
  });

  it('nothing imports test/ but test/ itself: what scripts and benches run lives in harness/ (and test/ imports it)', () => {
    const offending = [...FOLDERS, ...HARNESSES].filter((folder) => folder !== 'test').flatMap((folder) =>
      violations(folder, (imported) => folderOf(imported.target) === 'test'),
    );
    expect(offending).toEqual([]);
  });

  it('no import cycle between files', () => {
    // Every edge counts, type imports included: a cycle of types still ties two modules together.
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      stack.push(file);
      const targets = new Set((byFile.get(file)?.imports ?? []).map((imported) => imported.target).filter((target) => target && byFile.has(target)));
      for (const target of targets as Set<string>) {
        if (state.get(target) === 'open') cycles.push([...stack.slice(stack.indexOf(target)), target].join(' → '));
        else if (!state.has(target)) visit(target);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const source of files) if (!state.has(source.file)) visit(source.file);
    expect(cycles).toEqual([]);
  });
});
