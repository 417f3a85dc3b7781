// Bearer tokens per role, compared in constant time. Tokens are never logged.
import crypto from 'node:crypto';
import { ApiError } from './errors';

export const ROLES = ['operator', 'agent', 'viewer'] as const;
export type Role = (typeof ROLES)[number];
/** What a route demands: a role, or nothing at all. */
export type Access = Role | 'none';

/** The tokens a server accepts; a process may accept only some roles (an agent accepts only its own). */
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

function sameSecret(presented: string, expected: string): boolean {
  // Hash both to fixed-length digests so the comparison time does not depend on the lengths.
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

export function authorize(tokens: RoleTokens, access: Access, authorization: string | undefined): Role | null {
  if (access === 'none') return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!match) throw new ApiError('unauthorized', 'missing bearer token (Authorization: Bearer <token>)');
  const role = roleForToken(tokens, match[1]);
  if (!role) throw new ApiError('unauthorized', 'unknown bearer token');
  if (!satisfies(role, access)) throw new ApiError('forbidden', `this route needs the ${access} role; the token is ${role}`);
  return role;
}
