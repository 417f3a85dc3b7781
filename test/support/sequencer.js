// Runs the longest test files first, so that the jest workers end together: on a clean clone
// jest has no timings yet and orders by file size, which put the chaos and tour files (small files,
// long runs) at the tail, alone. Measured under load (2026-12-04, after the loop's trims); a file not
// listed keeps jest's own order after these.
const Sequencer = require('@jest/test-sequencer').default;

const LONGEST_FIRST = [
  'integration/chaos.test.ts', 'integration/hot-rescale.test.ts', 'integration/compose.test.ts', 'integration/recovery.test.ts', 'integration/kafka.test.ts',
  'integration/cli.test.ts', 'integration/evidence.test.ts', 'integration/evidence-judged.test.ts', 'integration/tour.test.ts', 'component/kafka-outage.test.ts',
  'integration/stream.test.ts', 'integration/partitions.test.ts', 'integration/scale-out.test.ts', 'integration/rollout.test.ts', 'integration/autoscaler.test.ts', 'integration/scale-in.test.ts',
  'e2e/web-ui.test.ts', 'workflow/record-histories.test.ts', 'integration/operation-sequences.test.ts', 'integration/kubernetes.test.ts', 'integration/start.test.ts',
  'workflow/replay.test.ts', 'integration/supervision.test.ts', 'integration/placement.test.ts', 'integration/demo.test.ts', 'integration/containers.test.ts',
  'integration/observability.test.ts', 'integration/fuzz.test.ts',
];

class LongestFirst extends Sequencer {
  sort(tests) {
    const rank = (test) => {
      const i = LONGEST_FIRST.findIndex((suffix) => test.path.endsWith(suffix));
      return i === -1 ? LONGEST_FIRST.length : i;
    };
    return [...super.sort(tests)].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = LongestFirst;
