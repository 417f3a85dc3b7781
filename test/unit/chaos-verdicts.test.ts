// The chaos checker's pure verdicts (harness/chaos/verdicts.ts), each case after the seed that found it.
import { skewedAgentsDeclaredLost, type FaultWindow } from '../../harness/chaos/verdicts';

const T0 = Date.parse('2026-12-04T08:49:52.574Z');
const LEASE = 2_000;
const skew: FaultWindow = { kind: 'clock-skew', runtime: 'chaos-b', fromMs: 26_586, toMs: 31_079 };
const at = (ms: number) => new Date(T0 + ms);

test('a node whose clock alone was skewed and that the lease sweeper declared LOST meanwhile is a violation', () => {
  const found = skewedAgentsDeclaredLost([skew], [{ subject: 'chaos-b', at: at(29_935), by: 'lease-sweeper' }], T0, LEASE, T0 + 60_000);
  expect(found).toHaveLength(1);
  expect(found[0]).toMatch(/^chaos-b declared LOST at .* \(by lease-sweeper\) while only its clock was skewed/);
});

test('network seed 15: an operator\'s recover of the skewed node is a decision, not a lease verdict', () => {
  expect(skewedAgentsDeclaredLost([skew], [{ subject: 'chaos-b', at: at(29_935), by: 'recover (operator)' }], T0, LEASE, T0 + 60_000)).toEqual([]);
  // the same recovery started by the sweeper is still judged
  expect(skewedAgentsDeclaredLost([skew], [{ subject: 'chaos-b', at: at(29_935), by: 'recover (lease-sweeper)' }], T0, LEASE, T0 + 60_000)).toHaveLength(1);
});

test('outside the skew, on another node, or with another fault on the node within a lease, nothing is judged', () => {
  expect(skewedAgentsDeclaredLost([skew], [{ subject: 'chaos-b', at: at(40_000), by: 'lease-sweeper' }], T0, LEASE, T0 + 60_000)).toEqual([]);
  expect(skewedAgentsDeclaredLost([skew], [{ subject: 'chaos-a', at: at(29_935), by: 'lease-sweeper' }], T0, LEASE, T0 + 60_000)).toEqual([]);
  const cut: FaultWindow = { kind: 'partition isolate', runtime: 'chaos-b', fromMs: 31_000, toMs: 35_000 };
  expect(skewedAgentsDeclaredLost([skew, cut], [{ subject: 'chaos-b', at: at(29_935), by: 'lease-sweeper' }], T0, LEASE, T0 + 60_000)).toEqual([]);
  const storeCut: FaultWindow = { kind: 'cut-store', runtime: null, fromMs: 28_000, toMs: 29_000 };
  expect(skewedAgentsDeclaredLost([skew, storeCut], [{ subject: 'chaos-b', at: at(29_935), by: 'lease-sweeper' }], T0, LEASE, T0 + 60_000)).toEqual([]);
});
