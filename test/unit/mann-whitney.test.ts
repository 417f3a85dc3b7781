// domain/mann-whitney.ts: the Mann-Whitney U test against values computed elsewhere, and the
// non-inferiority judgment evidence rows make with it (STYLE.md item 21).
import { binomialUpperTail, judgeErrorRate, judgeNonInferior, mannWhitneyU, normalUpperTail } from '../../domain/mann-whitney';

describe('mannWhitneyU (normal approximation, tie-corrected, continuity 0.5)', () => {
  it('matches scipy.stats.mannwhitneyu on its documented example', () => {
    // scipy's docs: males [19, 22, 16, 29, 24], females [20, 11, 17, 12]; U1 = 17 and
    // method='asymptotic' two-sided p = 0.11134688653314041, so one-sided ('greater') p = 0.0556734…
    const test = mannWhitneyU([19, 22, 16, 29, 24], [20, 11, 17, 12], 'greater');
    expect(test.u).toBe(17);
    expect(test).toMatchObject({ n1: 5, n2: 4 });
    expect(test.z).toBeCloseTo(1.5921683328, 6);
    expect(test.p * 2).toBeCloseTo(0.11134688653314041, 6);
  });

  it('uses mid-ranks and the tie-corrected variance', () => {
    // x = [1,2,2,3,3,3,4,5], y = [2,3,4,4,5,5,6,7,7]: U counted by hand over the 72 pairs (ties one half)
    // is 13.5; ties 2 ×3, 3 ×4, 4 ×3, 5 ×3, 7 ×2 give Σ(t³ − t) = 24 + 60 + 24 + 24 + 6 = 138, n = 17,
    // so σ² = 72/12 × (18 − 138/272) = 104.956…, z = (36 − 13.5 − 0.5)/σ = 2.1474313489 and (Python,
    // math.erfc) p = 0.0158794786 for 'less'.
    const test = mannWhitneyU([1, 2, 2, 3, 3, 3, 4, 5], [2, 3, 4, 4, 5, 5, 6, 7, 7], 'less');
    expect(test.u).toBe(13.5);
    expect(test.z).toBeCloseTo(2.1474313489, 6);
    expect(test.p).toBeCloseTo(0.0158794786, 6);
  });

  it('says nothing where every value is equal, and refuses an empty sample', () => {
    expect(mannWhitneyU([3, 3, 3], [3, 3], 'greater')).toMatchObject({ u: 3, z: 0, p: 1 });
    expect(() => mannWhitneyU([], [1], 'greater')).toThrow('at least one value');
  });

  it('has the normal tail to seven digits', () => {
    expect(normalUpperTail(0)).toBeCloseTo(0.5, 7);
    expect(normalUpperTail(1.959963985)).toBeCloseTo(0.025, 7);
    expect(normalUpperTail(-1.644853627)).toBeCloseTo(0.95, 7);
  });
});

describe('judgeNonInferior', () => {
  const base = [10, 11, 12, 10, 11, 13, 12, 11, 10, 12];

  it('passes an after window within the margin, with its test, statistic, p-value, margin and sizes', () => {
    const within = judgeNonInferior(base, base.map((v) => v * 1.05), { margin: 0.1, worse: 'higher' });
    expect(within.verdict).toBe('pass');
    expect(within.detail).toMatch(/^non-inferior: Mann-Whitney U = [\d.]+, p = [\d.]+ for after > baseline × 1.1 \(margin 10 %, confidence 0.95, n = 10 before, 10 after\)$/);
    expect(within).toMatchObject({ test: 'Mann-Whitney U', n1: 10, n2: 10, margin: 0.1, confidence: 0.95 });
  });

  it('fails an after window worse beyond the margin, either way round', () => {
    const slower = judgeNonInferior(base, base.map((v) => v * 1.5), { margin: 0.1, worse: 'higher' });
    expect(slower.verdict).toBe('regression');
    expect(slower.p!).toBeLessThan(0.05);
    expect(slower.detail).toContain('worse beyond the margin');
    const slowerThroughput = judgeNonInferior(base, base.map((v) => v * 0.5), { margin: 0.1, worse: 'lower' });
    expect(slowerThroughput.verdict).toBe('regression');
    expect(judgeNonInferior(base, base.map((v) => v * 1.5), { margin: 0.1, worse: 'lower' }).verdict).toBe('pass');
  });

  it('says "not enough samples" with fewer than 5 a side, never a pass', () => {
    expect(judgeNonInferior(base, [100, 200], { margin: 0.1, worse: 'higher' })).toMatchObject({
      verdict: 'not enough samples', u: null, p: null, detail: 'not enough samples to judge (n = 10 before, 2 after; at least 5 a side)',
    });
  });
});

describe('binomialUpperTail and judgeErrorRate (the errors row as a rate)', () => {
  it('sums the binomial tail exactly, and stays finite for large counts', () => {
    expect(binomialUpperTail(10, 0.5, 8)).toBeCloseTo((45 + 10 + 1) / 1024, 12);
    expect(binomialUpperTail(10, 0.5, 0)).toBe(1);
    expect(binomialUpperTail(3, 0.2, 4)).toBe(0);
    // n = 20,000 at 0.5: P(X ≥ 10,000) is just over a half, where (1 − p)^n alone underflows
    expect(binomialUpperTail(20_000, 0.5, 10_000)).toBeCloseTo(0.5028, 3);
  });

  it('passes one transient error in a window of work after a clean baseline, and fails two', () => {
    // the after window's share of errors under the bound: 500 × 1.1 / (10,000 + 500 × 1.1)
    const share = 550 / 10_550;
    const one = judgeErrorRate({ errors: 0, exposure: 10_000 }, { errors: 1, exposure: 500 });
    expect(one).toMatchObject({ verdict: 'pass', test: 'exact conditional binomial' });
    expect(one.p).toBeCloseTo(share, 10);
    const two = judgeErrorRate({ errors: 0, exposure: 10_000 }, { errors: 2, exposure: 500 });
    expect(two.verdict).toBe('regression');
    expect(two.p).toBeCloseTo(share ** 2, 10);
    expect(two.detail).toBe(`error rate worse beyond the margin: 0 error(s) in 10000 record(s) before, 2 in 500 after: exact conditional binomial test, p = ${Math.round(share ** 2 * 10_000) / 10_000} for after rate > baseline rate × 1.1 (margin 10 %, confidence 0.95)`);
  });

  it('judges the rate, not the count: the same errors over as much work as before pass, many more fail', () => {
    expect(judgeErrorRate({ errors: 20, exposure: 10_000 }, { errors: 22, exposure: 10_000 }).verdict).toBe('pass');
    expect(judgeErrorRate({ errors: 20, exposure: 10_000 }, { errors: 60, exposure: 10_000 }).verdict).toBe('regression');
    // an error in a handful of records after none in thousands is a signal
    expect(judgeErrorRate({ errors: 0, exposure: 10_000 }, { errors: 1, exposure: 10 }).verdict).toBe('regression');
    expect(() => judgeErrorRate({ errors: 0, exposure: 0 }, { errors: 1, exposure: 10 })).toThrow(/positive exposure/);
  });
});
