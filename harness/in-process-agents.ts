// Agents inside the test process for component tests of activities: a task host with the process
// driver running real child processes, behind the agent's real HTTP server on a loopback port, and
// activities over a PostgreSQL database of their own. `close()` ends every one of them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Pool } from 'pg';
import { createProcessDriver } from '../agent/drivers/process';
import { TaskHost } from '../agent/host';
import { PortAllocator } from '../agent/ports';
import { buildAgentServer } from '../agent/server';
import { createActivityDeps } from '../activities/deps';
import type { ActivityDeps } from '../activities/ports';
import type { TaskStart } from '../protocol';
import { createPool } from '../store/db';
import { migrate } from '../store/migrate';
import { createTestDatabase } from './database';
import { reservePortRange, type PortRange } from './ports';

/** Each agent's share of the reserved port block. */
const SLICE_SIZE = 16;

export interface InProcessAgent {
  host: TaskHost;
  endpoint: string;
}

export class InProcessAgents {
  private block: PortRange | null = null;
  private slicesTaken = 0;
  private readonly roots: string[] = [];
  private readonly hosts: TaskHost[] = [];
  private readonly servers: { close: () => Promise<unknown> }[] = [];
  private readonly pools: Pool[] = [];

  /** @param name names the test's databases and temporary folders (letters and digits: a database name) */
  constructor(private readonly name: string) {}

  /** Activity dependencies over a database of their own: a test sees only its own runtimes. */
  async freshDeps(): Promise<ActivityDeps> {
    const db = createPool((await createTestDatabase(this.name)).databaseUrl, { max: 4 });
    this.pools.push(db);
    await migrate(db);
    return createActivityDeps({ db });
  }

  /** An agent of runtime `id` on `port` (0: any), hosting `tasks` before it listens. */
  async start(id: string, credential: string, port = 0, tasks: TaskStart[] = []): Promise<InProcessAgent> {
    this.block ??= await reservePortRange();
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `scalegate-${this.name}-`));
    this.roots.push(root);
    const stateDir = path.join(root, 'agent');
    const range = this.block.slice(SLICE_SIZE * this.slicesTaken++, SLICE_SIZE);
    const ports = new PortAllocator({ stateDir, rangeStart: range.start, rangeEnd: range.end, quarantineMs: 0 });
    const host = new TaskHost({ service: createProcessDriver({ runtimeId: id, stateDir, log: () => {} }, ports) }, { stateDir });
    this.hosts.push(host);
    for (const task of tasks) await host.ensure(task);
    const app = buildAgentServer({ id, credential: () => credential, host, fence: () => 1, labels: {} });
    this.servers.push(app);
    const endpoint = await app.listen({ host: '127.0.0.1', port });
    return { host, endpoint };
  }

  /** Registers runtime `id` at `endpoint` with its credential, leased for `leaseTtlMs`. */
  register(deps: ActivityDeps, id: string, endpoint: string, credential: string, leaseTtlMs = 60_000) {
    return deps.stores.runtimes.register({ id, endpoint, labels: {}, slots: 4 }, leaseTtlMs, credential);
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((server) => server.close()));
    await Promise.all(this.hosts.map((host) => host.close()));
    for (const root of this.roots) fs.rmSync(root, { recursive: true, force: true });
    this.block?.release();
    await Promise.all(this.pools.map((pool) => pool.end()));
  }
}
