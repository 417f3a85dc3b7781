/**
 * Poll delays that start short and double up to `maxMs`: a condition met soon after the wait
 * begins (a process that starts in 100 ms) is seen soon after, and a long wait still polls at
 * `maxMs`, so the cost of waiting stays bounded.
 */
export function doublingDelays(firstMs: number, maxMs: number): () => number {
  let next = firstMs;
  return () => {
    const current = next;
    next = Math.min(maxMs, next * 2);
    return current;
  };
}
