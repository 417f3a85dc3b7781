export default async function teardown(): Promise<void> {
  const stop = (globalThis as Record<string, unknown>).__scalegateStop as (() => Promise<void>) | undefined;
  await stop?.();
}
