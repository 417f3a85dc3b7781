// Registration and the heartbeat loop: every leaseTtl/3 the agent renews its lease and reports its
// tasks. A refused fence (the control plane declared this runtime LOST, or it re-registered
// elsewhere) means: stop the revoked tasks, register again, carry on with the new fence.
//
// Credentials (DESIGN.md §3): the runtime's own credential, issued at registration, is kept in the
// state folder (mode 600) and presented on every heartbeat and re-registration. An agent that holds
// one first resumes with it (same fence, nothing revoked); only when the control plane answers
// that the credential is unknown or expired does it register with the shared agent token, which
// issues a new credential. The credential is never logged.
import path from 'node:path';
import fs from 'node:fs';
import { z } from 'zod';
import { HeartbeatAnswerSchema, RegisterAnswerSchema, RuntimeCredentialSchema, type TaskReport } from '../protocol';
import type { AgentConfig } from './config';
import { writePrivateFile } from './state-files';

/** The runtime's credential in the state folder. */
export const CREDENTIAL_FILE = 'credential.json';

const CredentialRecordSchema = z.object({ version: z.literal(1), runtimeId: z.string(), credential: RuntimeCredentialSchema });

/** Answers that mean "this credential will not be accepted again": register with the agent token. */
const CREDENTIAL_REFUSED = new Set(['invalid-credential', 'credential-expired']);

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
  /** the runtime's credential: read from the state folder, or issued by the last registration */
  private credential: string | null;
  /** true once this process has registered or resumed: from then on its API accepts `credential` */
  private registered = false;
  /** false while a newly issued credential could not be written to the state folder (retried every beat) */
  private credentialSaved = true;

  constructor(
    private readonly config: AgentConfig,
    private readonly endpoint: string,
    private readonly callbacks: LeaseCallbacks,
  ) {
    this.credential = this.readCredential();
  }

  get currentFence(): number {
    return this.fence;
  }

  /**
   * The credential the agent's own API accepts: its runtime's, once this process has registered
   * (or resumed) with the control plane; null before, when the API answers 503.
   */
  get currentCredential(): string | null {
    return this.registered ? this.credential : null;
  }

  private get credentialFile(): string {
    return path.join(this.config.stateDir, CREDENTIAL_FILE);
  }

  /** The credential kept in the state folder, if it is this runtime's; anything unusable is ignored (and logged). */
  private readCredential(): string | null {
    let text: string;
    try {
      text = fs.readFileSync(this.credentialFile, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.callbacks.log('credential unreadable; registering anew', { error: (error as Error).message });
      return null;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    const record = CredentialRecordSchema.safeParse(parsed);
    if (!record.success || record.data.runtimeId !== this.config.id) {
      this.callbacks.log('credential record unusable; registering anew', { file: this.credentialFile });
      return null;
    }
    return record.data.credential;
  }

  private async saveCredential(): Promise<void> {
    if (this.credential === null) return;
    try {
      await writePrivateFile(this.credentialFile, JSON.stringify({ version: 1, runtimeId: this.config.id, credential: this.credential }));
      this.credentialSaved = true;
    } catch (error) {
      // Kept in memory, so heartbeats go on; without the file a restarted agent cannot resume.
      this.credentialSaved = false;
      this.callbacks.log('credential not saved; retrying on the next heartbeat', { error: (error as Error).message });
    }
  }

  private async call(path: string, body: unknown, bearer: string): Promise<{ status: number; json: Record<string, unknown> }> {
    const response = await fetch(`${this.config.apiUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5000),
    });
    const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    return { status: response.status, json };
  }

  private accept(json: Record<string, unknown>): z.infer<typeof RegisterAnswerSchema> {
    const answer = RegisterAnswerSchema.parse(json);
    this.fence = answer.fence;
    this.intervalMs = answer.heartbeatIntervalMs;
    return answer;
  }

  /**
   * Resumes with the credential held (when there is one and the control plane still knows it for
   * a live lease), else registers with the agent token and keeps the new credential.
   */
  async register(): Promise<void> {
    const registration = { id: this.config.id, endpoint: this.endpoint, labels: this.config.labels, slots: this.config.slots };
    if (this.credential !== null) {
      const { status, json } = await this.call('/v1/runtimes', registration, this.credential);
      if (status === 200 || status === 201) {
        this.accept(json);
        this.registered = true;
        this.callbacks.log('resumed', { fence: this.fence, heartbeatIntervalMs: this.intervalMs });
        return;
      }
      if (!(status === 401 && CREDENTIAL_REFUSED.has(String(json.error)))) {
        throw new Error(`resume refused (${status}): ${String(json.error)}: ${String(json.message ?? '')}`);
      }
      this.callbacks.log('credential refused; registering with the agent token', { error: json.error });
    }
    const { status, json } = await this.call('/v1/runtimes', registration, this.config.token);
    if (status !== 201) throw new Error(`registration refused (${status}): ${String(json.error)}: ${String(json.message ?? '')}`);
    const answer = this.accept(json);
    if (!answer.credential) throw new Error('registration answered no credential');
    this.credential = answer.credential;
    this.registered = true;
    await this.saveCredential();
    this.callbacks.log('registered', { fence: this.fence, heartbeatIntervalMs: this.intervalMs });
  }

  async beat(): Promise<void> {
    if (!this.credentialSaved) await this.saveCredential();
    if (this.credential === null) throw new Error('no credential: not registered');
    const { status, json } = await this.call(`/v1/runtimes/${this.config.id}/heartbeat`, {
      fence: this.fence, tasks: this.callbacks.reports(),
    }, this.credential);
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
    if (status === 401 && CREDENTIAL_REFUSED.has(String(json.error))) {
      // The control plane no longer knows this credential (e.g. its database was replaced): register
      // again. Nothing is stopped here; the next heartbeat is told what is revoked.
      this.callbacks.log('heartbeat credential refused; registering again', { error: json.error });
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
