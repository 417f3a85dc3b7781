// Registration and the heartbeat loop: every leaseTtl/3 the agent renews its lease and reports its
// tasks. A refused fence (the control plane declared this runtime LOST, or it re-registered
// elsewhere) means: stop the revoked tasks, register again, carry on with the new fence.
import { HeartbeatAnswerSchema, RegisterAnswerSchema, type TaskReport } from '../protocol';
import type { AgentConfig } from './config';

export interface LeaseCallbacks {
  reports(): TaskReport[];
  revoke(taskIds: string[], reason: string): Promise<void>;
  log(event: string, fields?: Record<string, unknown>): void;
}

export class LeaseKeeper {
  private fence = 0;
  private intervalMs = 15_000;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly config: AgentConfig,
    private readonly endpoint: string,
    private readonly callbacks: LeaseCallbacks,
  ) {}

  get currentFence(): number {
    return this.fence;
  }

  private async call(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
    const response = await fetch(`${this.config.apiUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.config.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5000),
    });
    const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    return { status: response.status, json };
  }

  async register(): Promise<void> {
    const { status, json } = await this.call('/v1/runtimes', {
      id: this.config.id, endpoint: this.endpoint, labels: this.config.labels, slots: this.config.slots,
    });
    if (status !== 201) throw new Error(`registration refused (${status}): ${String(json.message ?? json.error)}`);
    const answer = RegisterAnswerSchema.parse(json);
    this.fence = answer.fence;
    this.intervalMs = answer.heartbeatIntervalMs;
    this.callbacks.log('registered', { fence: this.fence, heartbeatIntervalMs: this.intervalMs });
  }

  async beat(): Promise<void> {
    const { status, json } = await this.call(`/v1/runtimes/${this.config.id}/heartbeat`, {
      fence: this.fence, tasks: this.callbacks.reports(),
    });
    const { revoked } = HeartbeatAnswerSchema.catch({ revoked: [] }).parse(json);
    if (status === 200) {
      if (revoked.length) await this.callbacks.revoke(revoked, 'not placed on this runtime');
      return;
    }
    if (status === 409 || status === 404) {
      this.callbacks.log('lease lost', { status, error: json.error, revoked: revoked.length });
      await this.callbacks.revoke(revoked, `lease lost (${String(json.error)})`);
      await this.register();
      return;
    }
    throw new Error(`heartbeat answered ${status}: ${String(json.message ?? json.error)}`);
  }

  /** Registers (retrying until the API answers) and then heartbeats until stop(). */
  async start(): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        await this.register();
        break;
      } catch (error) {
        if (attempt % 10 === 0) this.callbacks.log('registration failed; retrying', { error: (error as Error).message });
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    const tick = async () => {
      if (this.stopped) return;
      try {
        await this.beat();
      } catch (error) {
        this.callbacks.log('heartbeat failed', { error: (error as Error).message });
      }
      if (!this.stopped) this.timer = setTimeout(tick, this.intervalMs);
    };
    this.timer = setTimeout(tick, this.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
