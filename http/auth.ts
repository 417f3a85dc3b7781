// Bearer tokens per role, compared in constant time. Tokens are never logged.
import crypto from 'node:crypto';
import { ApiError } from './errors';

export const ROLES = ['operator', 'agent', 'viewer'] as const;
export type Role = (typeof ROLES)[number];
/** What a route demands: a role, or nothing at all. */
export type Access = Role | 'none';

/** The tokens a server accepts; a process may accept only some roles (an agent accepts only its own). */
export type RoleTokens = Partial<Record<Role, string>>;

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
