// A bench on a stack of its own: the run's shared servers, a stack, the measurement printed as one
// JSON object, and everything stopped afterwards, whether the measurement succeeded or not (a
// failure exits 1).
import { startSharedServers } from '../../harness/shared-servers';
import { startStack, type Stack } from '../../harness/stack';

export function benchOnStack(options: Parameters<typeof startStack>[0], measure: (stack: Stack) => Promise<unknown>): void {
  const run = async () => {
    const servers = await startSharedServers({ prefix: 'scalegate-bench' });
    try {
      const stack = await startStack(options);
      try {
        console.log(JSON.stringify(await measure(stack), null, 2));
      } finally {
        await stack.stop();
      }
    } finally {
      await servers.stop();
    }
  };
  run().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
