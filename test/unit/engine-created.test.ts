// The order of the engine's creation times (agent/drivers/engine.ts compareCreated): the earliest of
// twin networks is the one every agent keeps, so all agents must sort them alike.
import { compareCreated } from '../../agent/drivers/engine';

it('orders RFC 3339 times by their instant, not their text (the engine drops trailing zeros of the nanoseconds)', () => {
  // as text the first sorts after the second ('Z' after '6')
  expect(compareCreated('2026-12-05T06:00:00.12345Z', '2026-12-05T06:00:00.123456789Z')).toBeLessThan(0);
  expect(compareCreated('2026-12-05T06:00:00.123456789Z', '2026-12-05T06:00:00.12345Z')).toBeGreaterThan(0);
  expect(compareCreated('2026-12-05T06:00:00Z', '2026-12-05T06:00:00.000000001Z')).toBeLessThan(0);
  expect(compareCreated('2026-12-05T06:00:01Z', '2026-12-05T06:00:00.999999999Z')).toBeGreaterThan(0);
  expect(compareCreated('2026-12-05T07:00:00.25+01:00', '2026-12-05T06:00:00.25Z')).toBe(0);
});
