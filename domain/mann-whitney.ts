// The Mann-Whitney U test (Wilcoxon rank-sum) over two independent samples, and the non-inferiority
// judgment evidence rows make with it (STYLE.md item 21: Kayenta's canary judge, Spotify's
// guardrails). Pure: the normal approximation with mid-ranks for ties, the tie-corrected variance
// and a continuity correction of 0.5, as scipy.stats.mannwhitneyu(method='asymptotic').

export interface MannWhitney {
  /** U of the first sample: the number of (x, y) pairs with x > y, ties counting one half */
  u: number;
  n1: number;
  n2: number;
  /** the continuity-corrected z of U for the alternative asked */
  z: number;
  /** one-sided p-value of that alternative */
  p: number;
}

/**
 * Is `x` stochastically greater than `y` ('greater') or less ('less')? Both samples need at least
 * one value; a variance of 0 (every value equal) gives z 0 and p 1 (no evidence of a difference).
 */
export function mannWhitneyU(x: readonly number[], y: readonly number[], alternative: 'greater' | 'less'): MannWhitney {
  const n1 = x.length;
  const n2 = y.length;
  if (n1 === 0 || n2 === 0) throw new Error('mannWhitneyU needs at least one value in each sample');
  const pooled = [...x.map((value) => ({ value, first: true })), ...y.map((value) => ({ value, first: false }))].sort((a, b) => a.value - b.value);
  const n = n1 + n2;
  let rankSumX = 0;
  let tieTerm = 0;
  for (let i = 0; i < n;) {
    let j = i;
    while (j + 1 < n && pooled[j + 1].value === pooled[i].value) j++;
    const midRank = (i + j) / 2 + 1; // ranks i+1 … j+1
    const tied = j - i + 1;
    tieTerm += tied ** 3 - tied;
    for (let k = i; k <= j; k++) if (pooled[k].first) rankSumX += midRank;
    i = j + 1;
  }
  const u = rankSumX - (n1 * (n1 + 1)) / 2;
  const mean = (n1 * n2) / 2;
  const variance = ((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1)));
  if (variance <= 0) return { u, n1, n2, z: 0, p: 1 };
  const sd = Math.sqrt(variance);
  const z = alternative === 'greater' ? (u - mean - 0.5) / sd : (mean - u - 0.5) / sd;
  return { u, n1, n2, z, p: normalUpperTail(z) };
}

/** P(Z > z) for a standard normal Z (erfc by Numerical Recipes' Chebyshev fit, relative error < 1.2e-7). */
export function normalUpperTail(z: number): number {
  return erfc(z / Math.SQRT2) / 2;
}

function erfc(x: number): number {
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const r = t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
    + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? r : 2 - r;
}

/** The confidence every statistical evidence row is judged at. */
export const EVIDENCE_CONFIDENCE = 0.95;
/** Fewer samples than this on a side: not enough to judge ("not enough samples" is its own verdict). */
export const MIN_SAMPLES = 5;

/**
 * A guardrail's non-inferiority margin: the after window may be worse than the baseline by at most
 * `margin` (a fraction). `worse` says which way is worse: 'higher' for latency and errors, 'lower'
 * for throughput.
 */
export interface Guardrail {
  margin: number;
  worse: 'higher' | 'lower';
}

export interface NonInferiority {
  verdict: 'pass' | 'regression' | 'not enough samples';
  test: 'Mann-Whitney U';
  u: number | null;
  p: number | null;
  n1: number;
  n2: number;
  margin: number;
  confidence: number;
  /** the judgment in one line with its numbers */
  detail: string;
}

/**
 * Is the after window worse than the baseline beyond the margin? One-sided Mann-Whitney U of the
 * after samples against the baseline's shifted by the margin (× (1 + margin) where higher is worse,
 * × (1 − margin) where lower is): a regression when p < 1 − confidence. Too few samples on a side
 * is not a pass.
 */
export function judgeNonInferior(before: readonly number[], after: readonly number[], guardrail: Guardrail, confidence = EVIDENCE_CONFIDENCE): NonInferiority {
  const { margin, worse } = guardrail;
  const base = { test: 'Mann-Whitney U' as const, n1: before.length, n2: after.length, margin, confidence };
  const bound = worse === 'higher' ? `after > baseline × ${1 + margin}` : `after < baseline × ${1 - margin}`;
  const sizes = `n = ${before.length} before, ${after.length} after`;
  if (before.length < MIN_SAMPLES || after.length < MIN_SAMPLES) {
    return { ...base, verdict: 'not enough samples', u: null, p: null, detail: `not enough samples to judge (${sizes}; at least ${MIN_SAMPLES} a side)` };
  }
  const shifted = before.map((value) => value * (worse === 'higher' ? 1 + margin : 1 - margin));
  const test = mannWhitneyU(after, shifted, worse === 'higher' ? 'greater' : 'less');
  const alpha = 1 - confidence;
  const verdict = test.p < alpha ? 'regression' : 'pass';
  const figures = `Mann-Whitney U = ${round(test.u)}, p = ${formatP(test.p)} for ${bound} (margin ${Math.round(margin * 100)} %, confidence ${confidence}, ${sizes})`;
  return { ...base, verdict, u: test.u, p: test.p, detail: verdict === 'regression' ? `worse beyond the margin: ${figures}` : `non-inferior: ${figures}` };
}

const round = (n: number) => Math.round(n * 10) / 10;
const formatP = (p: number) => (p < 0.0001 ? p.toExponential(1) : String(Math.round(p * 10_000) / 10_000));

/** An error-rate guardrail: the after window's errors per record may exceed the baseline's by at most 10 %. */
export const ERROR_RATE_GUARDRAIL: Guardrail = { margin: 0.1, worse: 'higher' };

export interface RateJudgment {
  verdict: 'pass' | 'regression';
  test: 'exact conditional binomial';
  p: number;
  detail: string;
}

/**
 * Is the after window's error rate worse than the baseline's beyond the margin? Errors are counts
 * over an exposure (records processed) on each side. Conditional on the total of errors, the after
 * window's share is binomial: under the bound (after rate = baseline rate × (1 + margin)) its
 * probability is n2(1 + m) / (n1 + n2(1 + m)), whatever the baseline rate (so a baseline of no
 * errors is judged too). One-sided exact p-value of the after window's errors or more (the
 * conditional test of two Poisson rates, as Przyborowski and Wilenski, and R's poisson.test): a
 * regression when p < 1 − confidence. Both exposures must be positive.
 */
export function judgeErrorRate(
  before: { errors: number; exposure: number }, after: { errors: number; exposure: number }, guardrail: Guardrail = ERROR_RATE_GUARDRAIL, confidence = EVIDENCE_CONFIDENCE,
): RateJudgment {
  if (!(before.exposure > 0 && after.exposure > 0)) throw new Error('judgeErrorRate needs a positive exposure on each side');
  const inflated = after.exposure * (1 + guardrail.margin);
  const share = inflated / (before.exposure + inflated);
  const p = binomialUpperTail(before.errors + after.errors, share, after.errors);
  const verdict = p < 1 - confidence ? 'regression' : 'pass';
  const figures = `${before.errors} error(s) in ${before.exposure} record(s) before, ${after.errors} in ${after.exposure} after: `
    + `exact conditional binomial test, p = ${formatP(p)} for after rate > baseline rate × ${1 + guardrail.margin} (margin ${Math.round(guardrail.margin * 100)} %, confidence ${confidence})`;
  return { verdict, test: 'exact conditional binomial', p, detail: verdict === 'regression' ? `error rate worse beyond the margin: ${figures}` : `error rate non-inferior: ${figures}` };
}

/** P(X ≥ k) for X ~ Binomial(n, p), summed in log space (no underflow for large n). */
export function binomialUpperTail(n: number, p: number, k: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  const logP = Math.log(p);
  const logQ = Math.log1p(-p);
  // log pmf(i) from log pmf(i − 1): × (n − i + 1) / i × p / q
  let logPmf = n * logQ;
  const terms: number[] = [];
  for (let i = 1; i <= n; i++) {
    logPmf += Math.log(n - i + 1) - Math.log(i) + logP - logQ;
    if (i >= k) terms.push(logPmf);
  }
  const top = Math.max(...terms);
  const sum = terms.reduce((total, t) => total + Math.exp(t - top), 0);
  return Math.min(1, Math.exp(top) * sum);
}
