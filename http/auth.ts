// Bearer tokens per role and per-runtime credentials, compared in constant time. Neither is ever
// logged, nor put in an error message.
import crypto from 'node:crypto';
import { RuntimeId } from '../protocol/workload';
import { ApiError } from './errors';

export const ROLES = ['operator', 'agent', 'viewer'] as const;
export type Role = (typeof ROLES)[number];
/**
 * What a route demands: a role; `runtime`, the credential of the runtime the route names (on the
 * API the `:id` in its path, on an agent the agent itself; DESIGN.md §3 "Credentials");
 * `agent-or-runtime`, either the agent token or that runtime's credential (registration);
 * `operator-or-agent`, either of those two role tokens (autoscaler signals); or nothing at all.
 */
export type Access = Role | 'operator-or-agent' | 'runtime' | 'agent-or-runtime' | 'none';

export const isRoleAccess = (access: Access): access is Role => (ROLES as readonly string[]).includes(access);

/** The role tokens a server accepts; a process may accept only some roles (an agent accepts none: only its runtime's credential). */
export type RoleTokens = Partial<Record<Role, string>>;

/** Shorter tokens are refused at start: guessable secrets must not guard the fleet. */
export const MIN_TOKEN_LENGTH = 24;

/** Throws, naming the roles (never the tokens), when a token is too short or two roles share one. */
export function checkRoleTokens(tokens: RoleTokens): void {
  const problems: string[] = [];
  const entries = ROLES.filter((role) => tokens[role] !== undefined).map((role) => [role, tokens[role] as string] as const);
  for (const [role, token] of entries) {
    if (token.length < MIN_TOKEN_LENGTH) problems.push(`the ${role} token is shorter than ${MIN_TOKEN_LENGTH} characters`);
  }
  for (let i = 0; i < entries.length; i++) {
    for (let j = i + 1; j < entries.length; j++) {
      if (entries[i][1] === entries[j][1]) problems.push(`the ${entries[i][0]} and ${entries[j][0]} roles share one token`);
    }
  }
  if (problems.length) throw new Error(`refusing to start: ${problems.join('; ')}`);
}

/** Constant-time equality: both sides hashed to fixed-length digests, so neither length nor content leaks through timing. */
function sameSecret(presented: string, expected: string): boolean {
  const a = crypto.createHash('sha256').update(presented).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}

/** The role a token grants, or null. Checks every role so timing does not reveal which matched. */
export function roleForToken(tokens: RoleTokens, presented: string): Role | null {
  let found: Role | null = null;
  for (const role of ROLES) {
    const expected = tokens[role];
    if (expected !== undefined && sameSecret(presented, expected) && found === null) found = role;
  }
  return found;
}

/** Operators may read what viewers read; agents only use agent routes. */
function satisfies(granted: Role, wanted: Role): boolean {
  return granted === wanted || (wanted === 'viewer' && granted === 'operator');
}

/** The bearer token of an Authorization header; 401 `unauthorized` without one. */
export function bearerOf(authorization: string | undefined): string {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!match) throw new ApiError('unauthorized', 'missing bearer token (Authorization: Bearer <token>)');
  return match[1];
}

/**
 * A browser's `Authorization: Basic base64(user:password)` as the bearer header of its password
 * (routes people open in a browser: http/route.ts `browser`); any other header as it is.
 */
export function bearerFromBasic(authorization: string | undefined): string | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]{1,1024})\s*$/i.exec(authorization ?? '');
  if (!match) return authorization;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const password = decoded.slice(decoded.indexOf(':') + 1);
  // A password that is no single token answers as a missing one (401), never echoed.
  return /^\S+$/.test(password) && decoded.includes(':') ? `Bearer ${password}` : undefined;
}

export function authorize(tokens: RoleTokens, access: Role | 'operator-or-agent' | 'none', authorization: string | undefined): Role | null {
  if (access === 'none') return null;
  const role = roleForToken(tokens, bearerOf(authorization));
  if (!role) throw new ApiError('unauthorized', 'unknown bearer token');
  if (access === 'operator-or-agent') {
    if (role !== 'operator' && role !== 'agent') throw new ApiError('forbidden', `this route needs the operator or agent role; the token is ${role}`);
    return role;
  }
  if (!satisfies(role, access)) throw new ApiError('forbidden', `this route needs the ${access} role; the token is ${role}`);
  return role;
}

/** How a server finds the credential a runtime must present (the API: its store; an agent: its own). */
export interface RuntimeCredentials {
  /**
   * The credential runtime `id` holds now, or null when it has none (unknown runtime). May throw a
   * coded error instead (an agent that has not registered yet answers 503 `unavailable`).
   */
  credentialOf(id: string): Promise<string | null> | string | null;
}

/** Who a call is from: a role, or a runtime proven by its credential. */
export type Caller =
  | { role: Role | null; runtime: null }
  | { role: null; runtime: { id: string; credential: string } };

/** Stands in for a missing credential in the comparison; no bearer token can equal it (it has spaces). */
const UNMATCHABLE = `no credential ${crypto.randomBytes(16).toString('hex')}`;

/**
 * Authenticates a call to a `runtime` or `agent-or-runtime` route. A role token is refused with
 * 403 (only `agent-or-runtime` accepts the agent token); anything else must be the credential of
 * `runtimeId` (401 `invalid-credential` otherwise). The comparison runs in constant time, also when
 * the runtime is unknown, and no message ever contains what was presented.
 */
export async function authorizeRuntime(
  tokens: RoleTokens,
  access: 'runtime' | 'agent-or-runtime',
  authorization: string | undefined,
  runtimeId: unknown,
  credentials: RuntimeCredentials,
): Promise<Caller> {
  const presented = bearerOf(authorization);
  const role = roleForToken(tokens, presented);
  if (role === 'agent' && access === 'agent-or-runtime') return { role, runtime: null };
  if (role) {
    throw new ApiError('forbidden', `this route needs the credential of the runtime it names; the ${role} token is not accepted here`);
  }
  // Only a well-formed runtime id is looked up (and named in the answer).
  const id = RuntimeId.safeParse(runtimeId).success ? (runtimeId as string) : null;
  const expected = id === null ? null : await credentials.credentialOf(id);
  // Compare even when there is nothing to compare with, so the answer takes as long either way.
  const matches = sameSecret(presented, expected ?? UNMATCHABLE) && expected !== null;
  if (!matches || id === null) {
    throw new ApiError('invalid-credential', id === null
      ? 'the call names no valid runtime id, so no credential can match'
      : `the bearer token is not the current credential of runtime ${id}`);
  }
  return { role: null, runtime: { id, credential: presented } };
}
