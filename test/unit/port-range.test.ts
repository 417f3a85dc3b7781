// The PortAllocator's range check, which runs before anything is bound or written: a range must
// end below Linux's ephemeral ports and must not run backwards. (The allocator against real
// loopback binds and a real state folder is test/component/ports.test.ts.) The ranges here are
// never bound; the state folder is never touched.
import { HIGHEST_ALLOWED_PORT, PortAllocator } from '../../agent/ports';

const stateDir = '/nonexistent/scalegate-unit-test'; // the constructor only remembers it

describe('PortAllocator range', () => {
  test('rejects a range reaching into the ephemeral ports or running backwards', () => {
    expect(HIGHEST_ALLOWED_PORT).toBe(32767);
    expect(() => new PortAllocator({ stateDir, rangeStart: 21000, rangeEnd: 32768, quarantineMs: 0 })).toThrow(/32767/);
    expect(() => new PortAllocator({ stateDir, rangeStart: 21010, rangeEnd: 21000, quarantineMs: 0 })).toThrow(/starts after it ends/);
  });

  test('accepts a range ending at the last port below the ephemeral ones', () => {
    expect(new PortAllocator({ stateDir, rangeStart: 32000, rangeEnd: 32767, quarantineMs: 0 }).rangeLabel).toBe('32000-32767');
  });
});
