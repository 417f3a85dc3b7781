// Exhaustiveness helper for `switch` statements over `as const` unions (STYLE.md §10): if a new
// member is added to a union, every switch that forgot it stops compiling here.

/** Ends an exhaustive switch. Unreachable at runtime unless untyped data slipped past validation. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
