// The scale-out's latency rows (domain/evidence.ts): p50 and p95 after the change against the
// baseline, a regression only past both the growth factor and the slack, naming both figures; an
// unmeasured side is not judged; without a tolerance (runs recorded before it) nothing is.
import { compareEvidence, DEFAULT_LATENCY_TOLERANCE, latencyRegressions, type EvidenceSnapshot } from '../../domain/evidence';

const snapshot = (latencyP50Ms: number | null, latencyP95Ms: number | null): EvidenceSnapshot => ({
  atMs: 0, tasks: [], ready: 2, processed: 100, ratePerSec: 10, latencyP50Ms, latencyP95Ms, backlog: 0, errors: 0,
});

describe('latencyRegressions', () => {
  it('names each row that doubled, with both figures', () => {
    expect(latencyRegressions(snapshot(150, 180), snapshot(300, 500), DEFAULT_LATENCY_TOLERANCE)).toEqual([
      'p50 latency grew from 150 to 300 ms (more than ×1.5 and +100 ms)',
      'p95 latency grew from 180 to 500 ms (more than ×1.5 and +300 ms)',
    ]);
  });

  it('a fast endpoint\'s few milliseconds of noise are no regression (the slack), nor is growth under the factor', () => {
    expect(latencyRegressions(snapshot(2, 4), snapshot(66, 60), DEFAULT_LATENCY_TOLERANCE)).toEqual([]);
    expect(latencyRegressions(snapshot(400, 500), snapshot(580, 700), DEFAULT_LATENCY_TOLERANCE)).toEqual([]);
    expect(latencyRegressions(snapshot(2, 4), snapshot(20, 250), DEFAULT_LATENCY_TOLERANCE)).toEqual([]); // two slow probes of twenty under load
    expect(latencyRegressions(snapshot(2, 4), snapshot(110, 60), DEFAULT_LATENCY_TOLERANCE)).toEqual(['p50 latency grew from 2 to 110 ms (more than ×1.5 and +100 ms)']);
  });

  it('does not judge a side that was not measured', () => {
    expect(latencyRegressions(snapshot(null, null), snapshot(900, 900), DEFAULT_LATENCY_TOLERANCE)).toEqual([]);
    expect(latencyRegressions(snapshot(100, 100), snapshot(null, null), DEFAULT_LATENCY_TOLERANCE)).toEqual([]);
  });
});

it('compareEvidence: a regression with the tolerance, none without it (runs recorded before latency was judged)', () => {
  const judged = compareEvidence(snapshot(150, 180), snapshot(300, 500), { expectedTasks: 2, latency: DEFAULT_LATENCY_TOLERANCE });
  expect(judged).toMatchObject({ verdict: 'regression', deltas: { latencyP95Ms: 320 } });
  expect(judged.reasons).toHaveLength(2);
  expect(compareEvidence(snapshot(150, 180), snapshot(300, 320), { expectedTasks: 2 })).toMatchObject({ verdict: 'pass', reasons: [] });
});
