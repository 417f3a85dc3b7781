// The fixed enums of /metrics' labels (api/metrics.ts): free text (an autoscaler refusal, an
// unplaced reason, a kind from elsewhere) maps to a code of a fixed list, `other` when unknown.
// Pure: it reads workflows/autoscaler.ts as text to find the decision labels it writes.
import fs from 'node:fs';
import path from 'node:path';
import { decisionCode, LABEL_VALUES, METRIC_LABELS, OTHER, unplacedReasonCode } from '../../api/metrics';
import { DECISION_CODE } from '../../domain/autoscale';

describe('autoscaler decision → decision code', () => {
  it('maps every label the autoscaler writes to a code of the enum, never to other', () => {
    const source = fs.readFileSync(path.resolve(__dirname, '../../workflows/autoscaler.ts'), 'utf8');
    const labels = [...new Set([...source.matchAll(/'(no-change: [^'\n]*)'/g)].map((m) => m[1]))];
    expect(labels.length).toBeGreaterThanOrEqual(10); // the eight domain codes but two, and the workflow's own
    // the refusal label is a template with its detail
    expect(source).toMatch(/label: `refused: \$\{/);
    for (const label of [...labels, 'scale-out', 'scale-in', 'refused: anything']) {
      expect({ label, code: decisionCode(label) }).not.toEqual({ label, code: OTHER });
      expect(LABEL_VALUES.decision).toContain(decisionCode(label));
    }
  });

  it('has a code for every decision the domain makes', () => {
    for (const code of Object.values(DECISION_CODE)) expect(LABEL_VALUES.decision).toContain(code);
  });

  it('maps a refusal, whatever its detail, to refused: cut mid-word, with line breaks, very long', () => {
    expect(decisionCode('refused: scale-out 2 → 3 ended refused: gates failed: deliv')).toBe('refused');
    expect(decisionCode('refused: line one\nline two\r\n')).toBe('refused');
    expect(decisionCode(`refused: ${'x'.repeat(10_000)}`)).toBe('refused');
    expect(decisionCode('  no-change: cooldown \n')).toBe('cooldown');
  });

  it('answers other for anything else', () => {
    for (const label of ['', 'refused', 'no-change:', 'no-change: something new', 'Scale-Out', 'constructor', '__proto__', 'toString']) {
      expect(decisionCode(label)).toBe(OTHER);
    }
  });
});

describe('unplaced reason → reason code', () => {
  it('keeps the reason placement writes and answers other for free text', () => {
    expect(unplacedReasonCode('placement-unavailable')).toBe('placement-unavailable');
    expect(unplacedReasonCode('no fresh READY runtime carries {"pool":"x"}\nat all')).toBe(OTHER);
    expect(unplacedReasonCode('')).toBe(OTHER);
  });
});

describe('the declared label enums', () => {
  it('are small fixed lists of distinct words with no line break', () => {
    for (const [kind, values] of Object.entries(LABEL_VALUES)) {
      expect([kind, new Set(values).size]).toEqual([kind, values.length]);
      expect(values.length).toBeLessThanOrEqual(100);
      for (const value of values) expect(value).toMatch(/^[A-Za-z0-9][\w.-]*$/);
    }
  });

  it('name an enum (or the route table, or the registry) for every label of every metric', () => {
    const sources = new Set([...Object.keys(LABEL_VALUES), 'route', 'workload']);
    for (const [metric, labels] of Object.entries(METRIC_LABELS)) {
      expect(metric).toMatch(/^scalegate_[a-z_]+$/);
      for (const source of Object.values(labels)) expect([metric, sources.has(source)]).toEqual([metric, true]);
    }
  });
});
