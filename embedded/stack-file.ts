// The running embedded stack's addresses, kept in its state folder (`<home>/stack.json`) by
// `npm start`, so `npx scalegate` reaches the API and Temporal it started (also when a port was
// moved) without flags. It holds no secret: the tokens are in tokens.json (mode 600).
import fs from 'node:fs';
import path from 'node:path';

export const STACK_FILE = 'stack.json';

export interface StackFile {
  apiUrl: string;
  uiUrl: string;
  temporalAddress: string;
  namespace: string;
  taskQueue: string;
  /** SCALEGATE_KAFKA_BROKERS of the stack's processes; null when Kafka is off */
  kafkaBrokers: string | null;
}

export function writeStackFile(home: string, stack: StackFile): void {
  fs.writeFileSync(path.join(home, STACK_FILE), `${JSON.stringify(stack, null, 2)}\n`);
}

export function removeStackFile(home: string): void {
  fs.rmSync(path.join(home, STACK_FILE), { force: true });
}

/** The stack file of a state folder (null: none, or not one `npm start` wrote). */
export function readStackFile(home: string): StackFile | null {
  try {
    const stack = JSON.parse(fs.readFileSync(path.join(home, STACK_FILE), 'utf8')) as Partial<StackFile>;
    return typeof stack.apiUrl === 'string' && typeof stack.temporalAddress === 'string' ? (stack as StackFile) : null;
  } catch {
    return null;
  }
}
