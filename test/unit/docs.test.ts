// Docs that run as written (issue 19): README.md and docs/*.md, read as text and checked against the
// code they describe, so a renamed file, command, flag, workflow input or route fails here instead of
// in a reader's first hour. Pure: it reads files and parses them; it starts no process, opens no
// port and makes no network call.
//
//   links      [text](path#anchor): the file or folder exists, the anchor is one of its headings
//              (GitHub's slugs); an http(s) link is only checked for shape
//   paths      a repo path named in prose or code (docs/workflows.md, workflows/scale-out.ts,
//              test/unit, DESIGN.md): it exists, except the runtime paths of RUNTIME_PATHS;
//              `docs/x.md ("Section")` and `"Section" below` name a heading of that file
//   scalegate  `[npx] scalegate <command> ...`: a command (and subcommand) of cli/main.ts's USAGE,
//              flags its parseArgs call declares and USAGE documents for that command; in code
//              blocks also the number of arguments (`scalegate temporal ...` is the Temporal CLI's)
//   temporal   `temporal workflow start|execute|signal-with-start --type T --task-queue scalegate
//              --input JSON`: T is registered (workflows/index.ts) and its own input schema takes the
//              JSON; the --name of signal, update and query lines is defined in workflows/
//   routes     curl against the API (127.0.0.1:8080) or an agent (127.0.0.1:74xx), and `METHOD /path`
//              in inline code: a route the API (api/server.ts offlineApiDocument) or the agent
//              (agent/server.ts) declares; a JSON body is one the route's protocol/ schema takes
//   npm        `npm run X`: a package.json script; `npx tsx F --flag`: F exists and declares the flag
import fs from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { offlineApiDocument } from '../../api/server';
import { USAGE } from '../../cli/main';
import { describeIssues, HeartbeatSchema, PlanRequestSchema, RegisterRuntimeSchema, RescaleRequestSchema, RolloutRequestSchema, ScaleRequestSchema, WorkloadDefinitionSchema } from '../../protocol';
import { TierPolicySchema, TierSignalSchema } from '../../protocol/tiers';
import { CHECKED_INPUT_SCHEMAS } from '../../protocol/workflow-inputs';
import type * as registered from '../../workflows';
import { AutoscalerInputSchema } from '../../workflows/autoscaler';
import { CrashLoopsInputSchema } from '../../workflows/crash-loops';
import { LeaseSweeperInputSchema } from '../../workflows/lease-sweeper';
import { PingInputSchema } from '../../workflows/ping';
import { ReconcileInputSchema } from '../../workflows/reconcile';
import { RescaleInputSchema } from '../../workflows/rescale-operator';
import { RetireInputSchema } from '../../workflows/retire-workload';
import { RolloutInputSchema } from '../../workflows/rollout';
import { SubtaskFailuresInputSchema } from '../../workflows/subtask-failures';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const DOC_FILES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).sort().map((name) => `docs/${name}`)];

// ------------------------------------------------------------------------------------------------
// What the docs are checked against, derived from the code

/** Each workflow type the worker registers (the exports of workflows/index.ts) → its own input schema. */
const INPUT_SCHEMAS: Record<keyof typeof registered, z.ZodType> = {
  ...CHECKED_INPUT_SCHEMAS,
  autoscaler: AutoscalerInputSchema,
  handleCrashLoops: CrashLoopsInputSchema,
  handleSubtaskFailures: SubtaskFailuresInputSchema,
  leaseSweeper: LeaseSweeperInputSchema,
  ping: PingInputSchema,
  reconcile: ReconcileInputSchema,
  rescaleOperator: RescaleInputSchema,
  retireWorkload: RetireInputSchema,
  rollout: RolloutInputSchema,
};

/** The body schema of each API operation that takes one (by operationId; the routes validate with these). */
const BODY_SCHEMAS: Record<string, z.ZodType> = {
  putWorkload: WorkloadDefinitionSchema,
  planWorkload: PlanRequestSchema,
  scaleWorkload: ScaleRequestSchema,
  rescaleOperator: RescaleRequestSchema,
  rolloutWorkload: RolloutRequestSchema,
  putTierPolicy: TierPolicySchema,
  signalTier: TierSignalSchema,
  registerRuntime: RegisterRuntimeSchema,
  heartbeatRuntime: HeartbeatSchema,
};

/**
 * Paths the docs name that exist only at run time or after a build, never in a clean clone: not
 * checked. Everything else that looks like a repo path must exist.
 */
const RUNTIME_PATHS = [
  '.scalegate/', // the state folder npm start writes (SCALEGATE_HOME): tokens.json, stack.json, agents/
  'dist/', // what `npm run lint:openapi` writes (dist/openapi.json); gitignored
];

/** The `temporal workflow` commands of the pinned Temporal CLI 1.5.1 (`temporal workflow --help`). */
const TEMPORAL_WORKFLOW_COMMANDS = new Set([
  'cancel', 'count', 'delete', 'describe', 'execute', 'execute-update-with-start', 'fix-history-json', 'list', 'metadata', 'query',
  'reset', 'result', 'show', 'signal', 'signal-with-start', 'stack', 'start', 'start-update-with-start', 'terminate', 'trace', 'update', 'update-options',
]);
const TEMPORAL_UPDATE_COMMANDS = new Set(['describe', 'execute', 'result', 'start']);
/** Its short flags (a query's `--type` is an alias of its `--name`: see checkTemporal). */
const TEMPORAL_ALIASES: Record<string, string> = { '-t': '--task-queue', '-i': '--input', '-w': '--workflow-id' };
const TASK_QUEUE = 'scalegate';

type OptionType = 'string' | 'boolean';
interface CliOption {
  type: OptionType;
  short?: string;
}

/** The `options` of a file's parseArgs call, read from its text (cli/main.ts, scripts/*.ts). */
function parseArgsOptions(source: string): Map<string, CliOption> | null {
  const start = source.search(/parseArgs\(\{[\s\S]*?options:\s*\{/);
  if (start < 0) return null;
  const open = source.indexOf('{', source.indexOf('options:', start));
  let depth = 0;
  let end = open;
  for (; end < source.length; end++) {
    if (source[end] === '{') depth++;
    if (source[end] === '}' && --depth === 0) break;
  }
  const options = new Map<string, CliOption>();
  for (const m of source.slice(open, end).matchAll(/'?([a-z][\w-]*)'?\s*:\s*\{\s*type:\s*'(string|boolean)'(?:\s*,\s*short:\s*'(\w)')?/g)) {
    options.set(m[1], { type: m[2] as OptionType, short: m[3] });
  }
  return options;
}

interface UsageEntry {
  /** the command and its subcommand, if any: ['scale'], ['workloads', 'apply'] */
  words: string[];
  /** its `<argument>` placeholders */
  args: string[];
  variadic: boolean;
  /** the options USAGE documents for it, by long name */
  flags: Set<string>;
}

interface Cli {
  entries: UsageEntry[];
  options: Map<string, CliOption>;
  /** the options that apply to every command (USAGE's section after the commands) */
  globalFlags: Set<string>;
  /** every flag USAGE names that parseArgs does not declare (should be none) */
  undeclared: string[];
}

/** The commands of cli/main.ts, from its USAGE text and its parseArgs options. */
function cliOf(usage: string, source: string): Cli {
  const options = parseArgsOptions(source) ?? new Map<string, CliOption>();
  const longOf = new Map([...options].flatMap(([name, o]) => [[`--${name}`, name], ...(o.short ? [[`-${o.short}`, name] as [string, string]] : [])]));
  const undeclared: string[] = [];
  const flagsIn = (text: string) =>
    new Set([...text.matchAll(/(?<![\w-])--?[a-z][\w-]*/g)].map(([flag]) => {
      if (!longOf.has(flag)) undeclared.push(flag);
      return longOf.get(flag) ?? flag;
    }));
  const lines = usage.split('\n').slice(1);
  const flagSection = lines.findIndex((line) => /^ {2}-/.test(line));
  const syntaxes: string[] = [];
  for (const line of lines.slice(0, flagSection)) {
    if (/^ {2}\S/.test(line)) syntaxes.push(line.slice(2).split(/ {2,}/)[0]);
    else if (/^\s+\[/.test(line)) syntaxes[syntaxes.length - 1] += ` ${line.trim().split(/ {2,}/)[0]}`;
  }
  const entries = syntaxes.flatMap((syntax) => syntax.split(' | ').map((alternative) => {
    const tokens = alternative.trim().split(/\s+/);
    const firstArgument = tokens.findIndex((t) => /^[<[-]/.test(t));
    const words = firstArgument === -1 ? tokens : tokens.slice(0, firstArgument);
    const args = tokens.filter((t) => /^<[^>]+>$/.test(t));
    return { words, args, variadic: args.some((a) => a.includes('...')), flags: flagsIn(alternative) };
  }));
  const globalFlags = flagsIn(lines.slice(flagSection).filter((line) => !line.trim().startsWith('(older spellings')).join('\n'));
  return { entries, options, globalFlags, undeclared };
}

interface Route {
  method: string;
  /** null for a parameter segment */
  segments: (string | null)[];
  operationId?: string;
  hasBody: boolean;
  server: 'API' | 'agent';
}

const segmentsOf = (routePath: string, param: RegExp) => routePath.split('/').slice(1).map((s) => (param.test(s) ? null : s));

/** The API's routes as its OpenAPI document declares them, built offline (no stack). */
function apiRoutes(): Route[] {
  const document = offlineApiDocument({});
  return Object.entries(document.paths).flatMap(([routePath, item]) =>
    Object.entries(item as Record<string, { operationId?: string; requestBody?: unknown }>).map(([method, operation]) => ({
      method: method.toUpperCase(), segments: segmentsOf(routePath, /^\{.+\}$/), operationId: operation.operationId, hasBody: Boolean(operation.requestBody), server: 'API' as const,
    })));
}

/** The agent's routes, read from agent/server.ts's route declarations. */
function agentRoutes(source: string): Route[] {
  return [...source.matchAll(/method:\s*'(\w+)',\s*path:\s*'([^']+)'/g)].map(([, method, routePath]) => ({ method, segments: segmentsOf(routePath, /^:/), hasBody: false, server: 'agent' as const }));
}

interface Context {
  cli: Cli;
  routes: Route[];
  /** the names passed to defineSignal / defineUpdate / defineQuery anywhere in workflows/ */
  handlers: Record<'Signal' | 'Update' | 'Query', Set<string>>;
  npmScripts: Record<string, string>;
  topFolders: Set<string>;
}

function context(): Context {
  const handlers = { Signal: new Set<string>(), Update: new Set<string>(), Query: new Set<string>() };
  for (const file of fs.readdirSync(path.join(ROOT, 'workflows')).filter((name) => name.endsWith('.ts'))) {
    for (const [, kind, name] of read(`workflows/${file}`).matchAll(/define(Signal|Update|Query)(?:<[^()]*>)?\(\s*['"]([^'"]+)['"]/g)) {
      handlers[kind as keyof typeof handlers].add(name);
    }
  }
  return {
    cli: cliOf(USAGE, read('cli/main.ts')),
    routes: [...apiRoutes(), ...agentRoutes(read('agent/server.ts'))],
    handlers,
    npmScripts: JSON.parse(read('package.json')).scripts,
    topFolders: new Set(fs.readdirSync(ROOT, { withFileTypes: true }).filter((e) => e.isDirectory() && e.name !== 'node_modules').map((e) => e.name)),
  };
}

// ------------------------------------------------------------------------------------------------
// Markdown, as far as these checks need it

interface Doc {
  file: string;
  /** heading slugs, as GitHub makes them (a repeated one gets -1, -2, ...) */
  anchors: Set<string>;
  /** heading texts, without Markdown */
  headings: string[];
  fences: { lang: string; text: string; line: number }[];
  /** runs of lines outside code blocks, with their first line */
  paragraphs: { text: string; line: number }[];
}

const plainHeading = (heading: string) => heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*]/g, '').trim();
/** GitHub's anchor of a heading (github-slugger): lower case, punctuation dropped, each space a dash. */
const slugOf = (heading: string) => plainHeading(heading).toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-');

function parseDoc(file: string, text: string): Doc {
  const doc: Doc = { file, anchors: new Set(), headings: [], fences: [], paragraphs: [] };
  const seen = new Map<string, number>();
  let fence: { marker: string; lang: string; lines: string[]; line: number } | null = null;
  let paragraph: { lines: string[]; line: number } | null = null;
  const endParagraph = () => {
    if (paragraph) doc.paragraphs.push({ text: paragraph.lines.join('\n'), line: paragraph.line });
    paragraph = null;
  };
  text.split('\n').forEach((line, index) => {
    const lineNo = index + 1;
    if (fence) {
      if (line.trim().startsWith(fence.marker) && line.trim().replace(/[`~]/g, '') === '') {
        doc.fences.push({ lang: fence.lang, text: fence.lines.join('\n'), line: fence.line });
        fence = null;
      } else fence.lines.push(line);
      return;
    }
    const open = /^\s*(`{3,}|~{3,})\s*([\w-]*)/.exec(line);
    if (open) {
      endParagraph();
      fence = { marker: open[1], lang: open[2], lines: [], line: lineNo + 1 };
      return;
    }
    if (line.trim() === '') return endParagraph();
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      endParagraph();
      const slug = slugOf(heading[1]);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      doc.anchors.add(count ? `${slug}-${count}` : slug);
      doc.headings.push(plainHeading(heading[1]));
      doc.paragraphs.push({ text: line, line: lineNo });
      return;
    }
    paragraph ??= { lines: [], line: lineNo };
    paragraph.lines.push(line);
  });
  endParagraph();
  return doc;
}

const lineAt = (text: string, offset: number) => text.slice(0, offset).split('\n').length - 1;

/** The inline code of a paragraph (line breaks inside one read as spaces) and its prose with the code blanked. */
function inlineCode(paragraph: { text: string; line: number }) {
  const spans: { code: string; line: number }[] = [];
  const prose = paragraph.text.replace(/(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g, (whole, _ticks, code: string, offset: number) => {
    spans.push({ code: code.replace(/\s*\n\s*/g, ' ').trim(), line: paragraph.line + lineAt(paragraph.text, offset) });
    return whole.replace(/[^\n]/g, ' ');
  });
  return { spans, prose };
}

// ------------------------------------------------------------------------------------------------
// Shell, as far as the docs' command lines need it

interface Command {
  words: string[];
  line: number;
  /** the operator that joined it to the command before: `|`, `&&`, ... */
  after?: string;
}

/** The commands of a shell text: quotes (also across lines), `\` continuations, comments, `|`, `&&`, `||`, `;`. */
function shellCommands(text: string, firstLine: number): Command[] {
  const commands: Command[] = [];
  let words: string[] = [];
  let word: string | null = null;
  let line = firstLine;
  let start = firstLine;
  let after: string | undefined;
  const endWord = () => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endCommand = (operator?: string) => {
    endWord();
    if (words.length) commands.push({ words, line: start, after });
    words = [];
    after = operator;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (word === null && words.length === 0) start = line;
    if (c === '\n') {
      line++;
      endCommand();
    } else if (c === '\\' && text[i + 1] === '\n') {
      i++;
      line++;
      endWord();
    } else if (c === '\\') {
      word = (word ?? '') + (text[++i] ?? '');
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      let quoted = '';
      for (; j < text.length && text[j] !== c; j++) {
        if (c === '"' && text[j] === '\\' && j + 1 < text.length) j++;
        if (text[j] === '\n') line++;
        quoted += text[j];
      }
      word = (word ?? '') + quoted;
      i = j;
    } else if (c === ' ' || c === '\t') {
      endWord();
    } else if (c === '#' && word === null) {
      while (i + 1 < text.length && text[i + 1] !== '\n') i++;
    } else if (c === '|' || c === '&' || c === ';') {
      const operator = text.slice(i, i + 2) === c + c ? c + c : c;
      if (operator === '&') word = (word ?? '') + c;
      else {
        i += operator.length - 1;
        endCommand(operator);
      }
    } else {
      word = (word ?? '') + c;
    }
  }
  endCommand();
  return commands;
}

// ------------------------------------------------------------------------------------------------
// The checks

type Category = 'links' | 'paths' | 'scalegate' | 'temporal' | 'routes' | 'npm';
interface Findings {
  problems: Record<Category, string[]>;
  /** how many items each check looked at (so an empty result is not a parser that saw nothing) */
  checked: Record<Category, number>;
}

/** Why a JSON text is not one `schema` takes (null: it is); `whose` names the schema. */
function refusal(json: string, schema: z.ZodType | undefined, whose: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return `is not JSON: ${json}`;
  }
  const parsed = schema?.safeParse(value);
  return parsed && !parsed.success ? `is refused by ${whose}: ${describeIssues(parsed.error)}` : null;
}

const EXTENSIONS = /\.(md|ts|js|mjs|json|ya?ml|sh|txt|sql)$/;
/** A placeholder in a path: `<home>`, `~`, `$VAR`, `{x}`, `…`, a package scope `@x/`, or an upper-case pattern like NNN_ */
const PLACEHOLDER = /[<>~$@{}…]|(^|\/)[A-Z]{2,}(_|\/|$)/;

function check(docs: Doc[], ctx: Context): Findings {
  const problems: Record<Category, string[]> = { links: [], paths: [], scalegate: [], temporal: [], routes: [], npm: [] };
  const checked: Record<Category, number> = { links: 0, paths: 0, scalegate: 0, temporal: 0, routes: 0, npm: 0 };
  const byFile = new Map(docs.map((d) => [d.file, d]));
  const docAt = (file: string): Doc | undefined => byFile.get(file) ?? (fs.existsSync(path.join(ROOT, file)) && file.endsWith('.md') ? parseDoc(file, read(file)) : undefined);

  for (const doc of docs) {
    const say = (category: Category, line: number, message: string) => problems[category].push(`${doc.file}:${line}: ${message}`);
    /** A path as the doc names it: from the repo root, else from the doc's folder. */
    const resolve = (named: string): string | null => {
      const candidates = [path.posix.normalize(named), path.posix.join(path.posix.dirname(doc.file), named)];
      return candidates.find((c) => !c.startsWith('..') && fs.existsSync(path.join(ROOT, c))) ?? null;
    };
    const existsGlob = (pattern: string) => {
      const directory = path.posix.dirname(pattern);
      const name = new RegExp(`^${path.posix.basename(pattern).replace(/[.+?^()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
      return fs.existsSync(path.join(ROOT, directory)) && fs.readdirSync(path.join(ROOT, directory)).some((entry) => name.test(entry));
    };

    // paths: anything with a slash that is a repo file (by its extension) or under a top-level folder, and any *.md
    const checkPaths = (text: string, line: number) => {
      const stripped = text.replace(/\]\([^)]*\)/g, ']').replace(/\w+:\/\/\S+/g, ' ');
      for (const m of stripped.matchAll(/(?<![\w./~<>@$*{}…:-])(?:\.\/)?[\w.~<>@$*{}…-]+(?:\/[\w.~<>@$*{}…-]*)+/g)) {
        const named = m[0].replace(/^\.\//, '').replace(/[.-]+$/, '');
        const where = line + lineAt(stripped, m.index);
        if (PLACEHOLDER.test(named) || RUNTIME_PATHS.some((p) => named.startsWith(p))) continue;
        if (!EXTENSIONS.test(named) && !ctx.topFolders.has(named.split('/')[0])) continue;
        checked.paths++;
        if (named.includes('*') ? !existsGlob(named) : !resolve(named)) say('paths', where, `${named} does not exist`);
      }
      for (const m of stripped.matchAll(/(?<![\w/.~<>-])[\w-]+\.md\b/g)) {
        checked.paths++;
        if (!resolve(m[0])) say('paths', line + lineAt(stripped, m.index), `${m[0]} does not exist`);
      }
    };

    // sections: docs/x.md ("Heading"), docs/x.md, "Heading", "Heading" below
    const checkSections = (prose: string, line: number) => {
      const named = [
        ...[...prose.matchAll(/([\w/.-]+\.md)\s*(?:\(\s*|,\s*)"([^"]+)"/g)].map((m) => ({ file: resolve(m[1]), section: m[2].replace(/\s+/g, ' '), index: m.index })),
        ...[...prose.matchAll(/"([^"]+)"\s+(?:below|above)/g)].map((m) => ({ file: doc.file, section: m[1].replace(/\s+/g, ' '), index: m.index })),
      ];
      for (const { file, section, index } of named) {
        const target = file ? docAt(file) : undefined;
        if (!target) continue;
        checked.links++;
        if (!target.headings.some((h) => h.toLowerCase().startsWith(section.toLowerCase()))) {
          say('links', line + lineAt(prose, index), `"${section}" is not a heading of ${target.file}`);
        }
      }
    };

    const checkLink = (target: string, line: number) => {
      checked.links++;
      if (/^[a-z][\w+.-]*:/i.test(target)) {
        if (!/^https?:\/\//.test(target) && !target.startsWith('mailto:')) return say('links', line, `${target}: not an http(s) link`);
        try {
          new URL(target);
        } catch {
          say('links', line, `${target}: not a URL`);
        }
        return;
      }
      const [file, anchor] = target.split('#', 2);
      const resolved = file ? path.posix.join(path.posix.dirname(doc.file), decodeURI(file)) : doc.file;
      if (!fs.existsSync(path.join(ROOT, resolved))) return say('links', line, `${target}: ${resolved} does not exist`);
      if (anchor === undefined) return;
      const linked = docAt(resolved);
      if (!linked) return say('links', line, `${target}: #${anchor} in a file that is not Markdown`);
      if (!linked.anchors.has(anchor)) say('links', line, `${target}: no heading of ${resolved} has the anchor #${anchor} (it has ${[...linked.anchors].join(', ')})`);
    };

    const checkScalegate = (args: string[], line: number, strict: boolean) => {
      const { cli } = ctx;
      const flags: string[] = [];
      const positionals: string[] = [];
      for (let i = 0; i < args.length; i++) {
        const arg = args[i];
        if (!arg.startsWith('-') || arg === '-') {
          positionals.push(arg);
          continue;
        }
        const [flag, inline] = arg.split('=', 2);
        const name = flag.startsWith('--') ? flag.slice(2) : [...cli.options].find(([, o]) => o.short === flag.slice(1))?.[0];
        const option = name === undefined ? undefined : cli.options.get(name);
        if (!name || !option) {
          say('scalegate', line, `scalegate ${args.join(' ')}: ${flag} is not an option of the CLI`);
          continue;
        }
        flags.push(name);
        if (option.type === 'string' && inline === undefined) i++;
      }
      if (positionals.length === 0) return;
      checked.scalegate++;
      const [command, sub] = positionals;
      const candidates = cli.entries.filter((e) => e.words[0] === command);
      if (!candidates.length) return say('scalegate', line, `scalegate ${args.join(' ')}: no command ${command} (USAGE has ${[...new Set(cli.entries.map((e) => e.words[0]))].join(', ')})`);
      const withSub = candidates.filter((e) => e.words.length > 1);
      // `jobs` and `jobs <job>`, `tiers` and `tiers show <tier>`: a subcommand by name, else the plain form whose arguments fit
      const plain = candidates.filter((e) => e.words.length === 1);
      const entry = withSub.find((e) => e.words[1] === sub) ?? plain.find((e) => positionals.length - 1 === e.args.length) ?? (withSub.length ? undefined : candidates[0]);
      if (!entry) {
        if (sub === undefined && !strict) return;
        return say('scalegate', line, `scalegate ${args.join(' ')}: no subcommand ${command} ${sub ?? ''} (USAGE has ${withSub.map((e) => e.words.join(' ')).join(', ')})`);
      }
      for (const flag of flags) {
        if (!cli.globalFlags.has(flag) && !entry.flags.has(flag)) say('scalegate', line, `scalegate ${args.join(' ')}: --${flag} is not an option of scalegate ${entry.words.join(' ')} (USAGE)`);
      }
      const given = positionals.length - entry.words.length;
      if (strict && (given < entry.args.length || (!entry.variadic && given > entry.args.length))) {
        say('scalegate', line, `scalegate ${args.join(' ')}: scalegate ${entry.words.join(' ')} takes ${entry.args.join(' ') || 'no arguments'}`);
      }
    };

    const checkTemporal = (args: string[], line: number) => {
      const [group, sub, ...rest] = args;
      if (group !== 'workflow' || sub === undefined) return;
      checked.temporal++;
      const shown = `temporal ${args.join(' ')}`;
      if (!TEMPORAL_WORKFLOW_COMMANDS.has(sub)) return say('temporal', line, `${shown}: temporal workflow has no command ${sub}`);
      let flagArgs = rest;
      if (sub === 'update') {
        if (rest[0] === undefined) return;
        if (!TEMPORAL_UPDATE_COMMANDS.has(rest[0])) return say('temporal', line, `${shown}: temporal workflow update has no command ${rest[0]}`);
        flagArgs = rest.slice(1);
      }
      const flags = new Map<string, string>();
      for (let i = 0; i < flagArgs.length; i++) {
        if (!flagArgs[i].startsWith('-')) continue;
        const [flag, inline] = flagArgs[i].split(/=(.*)/s, 2);
        const value = inline ?? (flagArgs[i + 1] !== undefined && !flagArgs[i + 1].startsWith('-') ? flagArgs[++i] : '');
        flags.set(TEMPORAL_ALIASES[flag] ?? flag, value);
      }
      if (flags.size === 0) return; // a mention of the command, not a command line
      const handler = (kind: keyof Context['handlers'], name: string | undefined, flag: string) => {
        if (name === undefined) return say('temporal', line, `${shown}: no ${flag}`);
        if (!ctx.handlers[kind].has(name)) say('temporal', line, `${shown}: no workflow defines the ${kind.toLowerCase()} ${name} (workflows/ define ${[...ctx.handlers[kind]].join(', ')})`);
      };
      if (sub === 'start' || sub === 'execute' || sub === 'signal-with-start') {
        const type = flags.get('--type');
        const schema = type === undefined ? undefined : INPUT_SCHEMAS[type as keyof typeof INPUT_SCHEMAS];
        if (!type || !schema) say('temporal', line, `${shown}: --type ${type ?? '(none)'} is not a workflow the worker registers (${Object.keys(INPUT_SCHEMAS).join(', ')})`);
        if (flags.get('--task-queue') !== TASK_QUEUE) say('temporal', line, `${shown}: --task-queue must be ${TASK_QUEUE}, not ${flags.get('--task-queue') ?? '(none)'}`);
        if (sub === 'signal-with-start') handler('Signal', flags.get('--signal-name'), '--signal-name');
        const input = flags.get('--input');
        if (input === undefined) return say('temporal', line, `${shown}: no --input`);
        const problem = refusal(input, schema, `${type}'s input schema`);
        if (problem) say('temporal', line, `${shown}: --input ${problem}`);
      } else if (sub === 'signal') {
        handler('Signal', flags.get('--name'), '--name');
      } else if (sub === 'update' && (rest[0] === 'start' || rest[0] === 'execute')) {
        handler('Update', flags.get('--name'), '--name');
      } else if (sub === 'query') {
        handler('Query', flags.get('--name') ?? flags.get('--type'), '--name (or --type)');
      }
    };

    /** A method and a path against the declared routes; a JSON body against the route's schema. */
    const checkRoute = (method: string, urlPath: string, body: string | undefined, servers: Route['server'][], line: number, shown: string) => {
      checked.routes++;
      const segments = urlPath.replace(/[?#].*$/, '').split('/').slice(1);
      const at = ctx.routes.filter((r) => servers.includes(r.server) && r.segments.length === segments.length && r.segments.every((s, i) => s === null || s === segments[i]));
      if (!at.length) return say('routes', line, `${shown}: the ${servers.join(' or ')} declares no route ${urlPath}`);
      const route = at.find((r) => r.method === method);
      if (!route) return say('routes', line, `${shown}: no ${method} on ${urlPath} (it has ${at.map((r) => r.method).join(', ')})`);
      if (body === undefined || !route.hasBody) return;
      const schema = route.operationId ? BODY_SCHEMAS[route.operationId] : undefined;
      if (!schema) return say('routes', line, `${shown}: BODY_SCHEMAS has no schema for ${route.operationId}`);
      const problem = refusal(body, schema, `${route.operationId}'s body schema`);
      if (problem) say('routes', line, `${shown}: the body ${problem}`);
    };

    const checkCurl = (args: string[], line: number) => {
      const valued = new Set(['-X', '--request', '-H', '--header', '-d', '--data', '--data-raw', '--data-binary', '--json', '-o', '--output', '-u', '--user', '-w', '--write-out', '-m', '--max-time']);
      let method: string | undefined;
      let body: string | undefined;
      let url: string | undefined;
      for (let i = 0; i < args.length; i++) {
        const arg = args[i];
        if (valued.has(arg)) {
          const value = args[++i];
          if (arg === '-X' || arg === '--request') method = value;
          if (['-d', '--data', '--data-raw', '--data-binary', '--json'].includes(arg)) body = value;
        } else if (/^https?:\/\//.test(arg)) url = arg;
        // the banner's export (README "Drive it"): the API, whatever port it has
        else if (/^\$\{?SCALEGATE_API_URL\}?\//.test(arg)) url = arg.replace(/^\$\{?SCALEGATE_API_URL\}?/, 'http://127.0.0.1:8080');
      }
      const target = url && /^https?:\/\/(?:127\.0\.0\.1|localhost):(\d+)(\/[^?#]*)?/.exec(url);
      if (!target) return;
      const port = Number(target[1]);
      const server = port === 8080 ? 'API' : port >= 7401 && port <= 7499 ? 'agent' : null;
      if (server) checkRoute(method ?? (body === undefined ? 'GET' : 'POST'), target[2] ?? '/', body, [server], line, `curl ${args.join(' ')}`);
    };

    /** `npm run X [-- args]`, `npm start|test [-- args]`: X is a script; a `node --import tsx F` script's args are F's flags. */
    const checkNpm = (words: string[], line: number) => {
      const [verb, ...after] = words.slice(1);
      const script = verb === 'run' ? after.shift() : verb === 'start' || verb === 'test' ? verb : undefined;
      if (script === undefined) return;
      checked.npm++;
      const command = ctx.npmScripts[script];
      if (command === undefined) return say('npm', line, `npm ${words.slice(1).join(' ')}: package.json has no script ${script}`);
      const file = /^(?:exec )?node --import tsx (\S+\.ts)$/.exec(command)?.[1];
      if (file && after[0] === '--') checkScriptFlags(file, after.slice(1), line);
    };

    const checkScriptFlags = (file: string, args: string[], line: number) => {
      if (!fs.existsSync(path.join(ROOT, file))) return; // the path check reports it
      const options = parseArgsOptions(read(file));
      if (!options) return;
      checked.npm++;
      for (const arg of args.filter((a) => a.startsWith('--'))) {
        if (!options.has(arg.slice(2).split('=')[0])) say('npm', line, `${file} ${args.join(' ')}: ${arg} is not an option of ${file} (its parseArgs has ${[...options.keys()].map((o) => `--${o}`).join(', ')})`);
      }
    };

    /** A command without its leading `VAR=value` assignments, and the program it runs (through npx or not). */
    const parts = (command: Command) => {
      const first = command.words.findIndex((w) => !/^[A-Z_][A-Z0-9_]*=/.test(w));
      const words = first === -1 ? [] : command.words.slice(first);
      const viaNpx = words[0] === 'npx';
      return { words, program: viaNpx ? words[1] : words[0], args: words.slice(viaNpx ? 2 : 1) };
    };

    const checkCommands = (commands: Command[], strict: boolean) => {
      commands.forEach((command, index) => {
        const { words, program, args } = parts(command);
        // `scalegate workloads list | get orders` reads as alternatives, but a shell runs a pipe
        if (command.after === '|' && index > 0 && parts(commands[index - 1]).program === 'scalegate' && ctx.cli.entries.some((e) => e.words.includes(words[0]))) {
          say('scalegate', command.line, `| ${words.join(' ')}: alternatives written as a shell pipe; write one command per line`);
        }
        if (program === 'scalegate' && args[0] === 'temporal') checkTemporal(args.slice(1), command.line);
        else if (program === 'scalegate') checkScalegate(args, command.line, strict);
        else if (program === 'temporal') checkTemporal(args, command.line);
        else if (program === 'curl') checkCurl(args, command.line);
        else if (words[0] === 'npm') checkNpm(words, command.line);
        else if (program === 'tsx' && args[0]?.endsWith('.ts')) checkScriptFlags(args[0], args.slice(1), command.line);
      });
    };

    for (const paragraph of doc.paragraphs) {
      const { spans, prose } = inlineCode(paragraph);
      for (const m of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+["'][^)]*["'])?\s*\)/g)) checkLink(m[1], paragraph.line + lineAt(prose, m.index));
      checkPaths(prose, paragraph.line);
      checkSections(prose, paragraph.line);
      for (const span of spans) {
        checkPaths(span.code, span.line);
        const route = /^(GET|HEAD|POST|PUT|PATCH|DELETE) (\/\S*)(?: (.*))?$/.exec(span.code);
        if (route) checkRoute(route[1], route[2], route[3]?.startsWith('{"') ? route[3] : undefined, ['API', 'agent'], span.line, span.code);
        else checkCommands(shellCommands(span.code, span.line), false);
      }
    }
    for (const fence of doc.fences) {
      checkPaths(fence.text, fence.line);
      if (['', 'sh', 'bash', 'shell', 'console'].includes(fence.lang)) checkCommands(shellCommands(fence.text, fence.line), true);
    }
  }
  return { problems, checked };
}

// ------------------------------------------------------------------------------------------------

const ctx = context();
const findings = check(DOC_FILES.map((file) => parseDoc(file, read(file))), ctx);

describe('the docs run as written (README.md, docs/*.md)', () => {
  test.each<[Category, string, number]>([
    ['links', 'every relative link reaches a file, every anchor and named section a heading', 10],
    ['paths', 'every repo path they name exists', 50],
    ['scalegate', 'every scalegate line is a command, subcommand and flags of the CLI', 30],
    ['temporal', 'every temporal workflow line starts a registered type on the scalegate queue with an input its schema takes, or names a defined signal, update or query', 20],
    ['routes', 'every curl line and METHOD /path is a declared route, with a body its schema takes', 40],
    ['npm', 'every npm run is a package.json script, every script flag one it declares', 10],
  ])('%s: %s', (category, _what, atLeast) => {
    expect(findings.problems[category]).toEqual([]);
    expect(findings.checked[category]).toBeGreaterThanOrEqual(atLeast);
  });
});

describe('what the docs are checked against', () => {
  test('USAGE documents only flags the CLI parseArgs declares, and the ones every command takes', () => {
    expect(ctx.cli.undeclared).toEqual([]);
    expect([...ctx.cli.globalFlags].sort()).toEqual(expect.arrayContaining(['api', 'help', 'json', 'no-wait', 'wait']));
    expect(ctx.cli.entries.find((e) => e.words.join(' ') === 'scale')).toMatchObject({ args: ['<workload>', '<replicas>'] });
    expect([...ctx.cli.entries.find((e) => e.words.join(' ') === 'workloads apply')!.flags]).toEqual(['file']);
  });

  test('every API operation that takes a body has its schema in BODY_SCHEMAS', () => {
    const withBody = ctx.routes.filter((r) => r.server === 'API' && r.hasBody).map((r) => r.operationId);
    expect(withBody.sort()).toEqual(Object.keys(BODY_SCHEMAS).sort());
  });

  test('the handler names of workflows/ are found', () => {
    expect([...ctx.handlers.Signal]).toEqual(expect.arrayContaining(['abort', 'observe', 'policy', 'subtasksFailed']));
    expect([...ctx.handlers.Update]).toEqual(expect.arrayContaining(['approve', 'reject']));
    expect([...ctx.handlers.Query]).toEqual(expect.arrayContaining(['phase', 'status']));
  });
});

describe('the checks catch what they are for', () => {
  const problemsOf = (markdown: string) => {
    const { problems } = check([parseDoc('docs/example.md', markdown)], ctx);
    return Object.values(problems).flat().map((p) => p.replace(/^docs\/example\.md:\d+: /, ''));
  };
  const fence = (text: string) => `\`\`\`sh\n${text}\n\`\`\``;

  test('links, anchors, paths and sections', () => {
    expect(problemsOf('[a](api.md) [b](architecture.md#the-stream-runtime) [c](../README.md#run-it) [d](https://example.com/x)')).toEqual([]);
    expect(problemsOf('[a](nope.md)')).toEqual([expect.stringContaining('docs/nope.md does not exist')]);
    expect(problemsOf('[a](api.md#nope)')).toEqual([expect.stringContaining('no heading of docs/api.md has the anchor #nope')]);
    expect(problemsOf('The route table is DESIGN.md §6.')).toEqual(['DESIGN.md does not exist']);
    expect(problemsOf('See `workflows/scale-out.ts`, `test/unit`, `docs/workflows.md` and workflows/nope.ts.')).toEqual(['workflows/nope.ts does not exist']);
    expect(problemsOf('`<home>/stack.json`, `~/.cache/scalegate/x`, `.scalegate/tokens.json`, `/v1/state`, `tasks/<taskId>/process.json`')).toEqual([]);
    expect(problemsOf('Details: docs/workflows.md ("Exits"), docs/workflows.md ("Nowhere").')).toEqual(['"Nowhere" is not a heading of docs/workflows.md']);
  });

  test('scalegate lines', () => {
    expect(problemsOf(fence('npx scalegate scale demo-web 3 --wait\nscalegate workloads apply -f w.yaml --json\nscalegate temporal anything --goes'))).toEqual([]);
    expect(problemsOf(fence('scalegate sclae orders 3'))).toEqual([expect.stringContaining('no command sclae')]);
    expect(problemsOf(fence('scalegate workloads put orders'))).toEqual([expect.stringContaining('no subcommand workloads put')]);
    expect(problemsOf(fence('scalegate ledger --limit 10 --soak=3'))).toEqual([expect.stringContaining('--soak is not an option of the CLI')]);
    expect(problemsOf(fence('scalegate ledger --reason x'))).toEqual([expect.stringContaining('--reason is not an option of scalegate ledger')]);
    expect(problemsOf(fence('scalegate rescale clicks 4'))).toEqual([expect.stringContaining('takes <job> <operator> <parallelism>')]);
    expect(problemsOf(fence('scalegate workloads list | get orders'))).toEqual([expect.stringContaining('alternatives written as a shell pipe')]);
    expect(problemsOf('`scalegate operations show` prints it')).toEqual([]);
  });

  test('temporal lines', () => {
    const start = (flags: string) => fence(`temporal workflow start --task-queue scalegate --workflow-id scale:orders \\\n  ${flags}`);
    expect(problemsOf(start(`--type scaleOut --input '{"workload":"orders","replicas":4}'`))).toEqual([]);
    expect(problemsOf(start(`--type scaleUp --input '{}'`))).toEqual([expect.stringContaining('--type scaleUp is not a workflow the worker registers')]);
    expect(problemsOf(start(`--type scaleOut --input '{"workload":"orders"}'`))).toEqual([expect.stringContaining("--input is refused by scaleOut's input schema: replicas")]);
    expect(problemsOf(start(`--type ping --input '{note}'`))).toEqual([expect.stringContaining('--input is not JSON')]);
    expect(problemsOf(fence(`npx scalegate temporal workflow execute --type ping -t other --input '{}'`))).toEqual([expect.stringContaining('--task-queue must be scalegate, not other')]);
    expect(problemsOf(fence('temporal workflow signal --workflow-id scale:orders --name stop'))).toEqual([expect.stringContaining('no workflow defines the signal stop')]);
    expect(problemsOf(fence('temporal workflow query --workflow-id scale:orders --type phase\ntemporal workflow update execute --workflow-id scale:orders --name approve'))).toEqual([]);
    expect(problemsOf('`temporal workflow terminate` and `temporal workflow start` are mentions')).toEqual([]);
  });

  test('curl lines and routes', () => {
    expect(problemsOf(fence(`curl -s -X POST -H "Authorization: Bearer $OP" \\\n  http://127.0.0.1:8080/v1/workloads/orders/scale -d '{"replicas": 3}'`))).toEqual([]);
    expect(problemsOf(fence('curl -s http://127.0.0.1:8080/v1/workload/orders'))).toEqual([expect.stringContaining('declares no route /v1/workload/orders')]);
    expect(problemsOf(fence('curl -s "$SCALEGATE_API_URL/v1/workload/orders"'))).toEqual([expect.stringContaining('declares no route /v1/workload/orders')]);
    expect(problemsOf(fence('curl -s -X DELETE http://127.0.0.1:8080/v1/state'))).toEqual([expect.stringContaining('no DELETE on /v1/state')]);
    expect(problemsOf(fence(`curl -s http://127.0.0.1:8080/v1/workloads/orders/scale -d '{"replica": 3}'`))).toEqual([expect.stringContaining("the body is refused by scaleWorkload's body schema")]);
    expect(problemsOf('`GET /v1/tasks/:taskId` on an agent, `POST /v1/operations/<id>/abort`, `PUT /v1/nope`')).toEqual([expect.stringContaining('declares no route /v1/nope')]);
    expect(problemsOf('`POST /v1/jobs/:job/operators/:op/rescale {parallelism}`, `POST /v1/jobs/clicks/operators/agg/rescale {"parallelism": 0}`'))
      .toEqual([expect.stringContaining("is refused by rescaleOperator's body schema: parallelism")]);
  });

  test('npm lines', () => {
    expect(problemsOf(fence('npm ci && npm start -- --demo\nnpm run bench:placement\nnpx tsx scripts/loadgen.ts --db x --source t --rate 9'))).toEqual([]);
    expect(problemsOf(fence('npm run bench:nope'))).toEqual([expect.stringContaining('no script bench:nope')]);
    expect(problemsOf(fence('npx tsx scripts/loadgen.ts --db x --speed 9'))).toEqual([expect.stringContaining('--speed is not an option of scripts/loadgen.ts')]);
  });
});
