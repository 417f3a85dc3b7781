// The one operation shell (issue 36 item 1): scaleOut, scaleIn, recoverRuntime and rescaleOperator
// take their phase, status query, abort guard, ledger rows and exits from beginOperation
// (workflows/operation.ts) instead of copies of their own, and each reads as its steps.
// Pure: it reads the source text; it runs nothing.
import fs from 'node:fs';
import path from 'node:path';

const WORKFLOWS = path.resolve(__dirname, '../../workflows');
const OPERATIONS = ['scale-out.ts', 'scale-in.ts', 'recover-runtime.ts', 'rescale-operator.ts'];
const read = (file: string) => fs.readFileSync(path.join(WORKFLOWS, file), 'utf8');

describe('the operation shell', () => {
  it.each(OPERATIONS)('%s keeps no shell of its own: no phase tracking, abort handling, status handler or ledger append', (file) => {
    const source = read(file);
    for (const own of ['trackOperation(', 'handleAborts(', 'setHandler(', 'appendLedger', 'upsertSearchAttributes(']) {
      expect({ file, own, found: source.includes(own) }).toEqual({ file, own, found: false });
    }
  });

  it.each(OPERATIONS)('%s reads as its steps: under 150 lines', (file) => {
    expect(read(file).split('\n').length).toBeLessThan(150);
  });

  it('every operation begins through beginOperation, directly or through the scale shell', () => {
    expect(read('scale-operation.ts')).toContain('beginOperation(');
    for (const file of ['scale-out.ts', 'scale-in.ts']) expect(read(file)).toContain('beginScaleOperation(');
    for (const file of ['recover-runtime.ts', 'rescale-operator.ts']) expect(read(file)).toContain('beginOperation(');
  });
});
