// Registration and the heartbeat loop: every leaseTtl/3 the agent renews its lease and reports its
// tasks. A refused fence (the control plane declared this runtime LOST, or it re-registered
// elsewhere) means: stop the revoked tasks, register again, carry on with the new fence.
//
// Static stability (DESIGN.md §3): the lease is the control plane's business, never a reason for
// the agent to stop anything. Tasks stop only when an answer lists them as revoked (a 200, or a
// 409 stale-fence: their work was moved elsewhere). An API that cannot be reached, answers 5xx,
// 404 (it does not know this runtime) or 401 (it does not know the credential), a lease that ran
// out: every task keeps running while the agent retries, with backoff (never a tight loop), and
// logs each change of its link to the control plane once, not every attempt.
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
import { retryDelayMs } from '../lib/backoff';

/** The runtime's credential in the state folder. */
export const CREDENTIAL_FILE = 'credential.json';

const CredentialRecordSchema = z.object({ version: z.literal(1), runtimeId: z.string(), credential: RuntimeCredentialSchema });

/** Answers that mean "this credential will not be accepted again": register with the agent token. */
const CREDENTIAL_REFUSED = new Set(['invalid-credential', 'credential-expired']);

export interface LeaseCallbacks {
  reports(): TaskReport[];
  /** Stop exactly these tasks (a heartbeat answer revoked them); everything else runs on. */
  revoke(taskIds: string[], reason: string): Promise<void>;
  log(event: string, fields?: Record<string, unknown>): void;
}

export interface LeaseTiming {
  /** first retry delay after a failure (default 250 ms); doubled per failure */
  retryBaseMs?: number;
  /** the longest retry delay (default 5 s, and never longer than the heartbeat interval) */
  retryMaxMs?: number;
  /** how long one call to the API may take (default 5 s) */
  requestTimeoutMs?: number;
}

/** A failed exchange with the control plane; `kind` names the situation, for logging once per change. */
class LinkFailure extends Error {
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
    this.name = 'LinkFailure';
  }
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
  /** the next exchange is a registration (at start, and after a refused heartbeat) */
  private mustRegister = true;
  /** consecutive failed exchanges, for the backoff */
  private failures = 0;
  /** what is wrong with the link now (null: nothing), so each change is logged once */
  private trouble: { kind: string; since: number } | null = null;
  /** tasks whose revocation is under way, so a repeated answer does not stop them twice */
  private readonly revoking = new Set<string>();
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly requestTimeoutMs: number;

  constructor(
    private readonly config: AgentConfig,
    private readonly endpoint: string,
    private readonly callbacks: LeaseCallbacks,
    timing: LeaseTiming = {},
  ) {
    this.credential = this.readCredential();
    this.retryBaseMs = timing.retryBaseMs ?? 250;
    this.retryMaxMs = timing.retryMaxMs ?? 5_000;
    this.requestTimeoutMs = timing.requestTimeoutMs ?? 5_000;
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

  private async call(what: string, urlPath: string, body: unknown, bearer: string): Promise<{ status: number; json: Record<string, unknown> }> {
    let response: Response;
    try {
      response = await fetch(`${this.config.apiUrl}${urlPath}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      throw new LinkFailure('unreachable', `${what}: control plane unreachable (${cause ?? (error as Error).message})`);
    }
    const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    return { status: response.status, json };
  }

  private refused(what: string, status: number, json: Record<string, unknown>): LinkFailure {
    return new LinkFailure(`${what} ${status} ${String(json.error ?? '')}`.trim(), `${what} answered ${status}: ${String(json.error)}: ${String(json.message ?? '')}`);
  }

  private accept(json: Record<string, unknown>): z.infer<typeof RegisterAnswerSchema> {
    const answer = RegisterAnswerSchema.parse(json);
    this.fence = answer.fence;
    this.intervalMs = answer.heartbeatIntervalMs;
    return answer;
  }

  /**
   * Resumes with the credential held (when there is one and the control plane still knows it for
   * a live lease), else registers with the agent token and keeps the new credential. Throws when
   * the control plane cannot be reached or refuses (e.g. 409 runtime-live); nothing is stopped.
   */
  async register(): Promise<void> {
    const registration = { id: this.config.id, endpoint: this.endpoint, labels: this.config.labels, slots: this.config.slots };
    if (this.credential !== null) {
      const { status, json } = await this.call('resume', '/v1/runtimes', registration, this.credential);
      if (status === 200 || status === 201) {
        this.accept(json);
        this.registered = true;
        this.mustRegister = false;
        this.callbacks.log('resumed', { fence: this.fence, heartbeatIntervalMs: this.intervalMs });
        return;
      }
      if (!(status === 401 && CREDENTIAL_REFUSED.has(String(json.error)))) throw this.refused('resume', status, json);
      this.callbacks.log('credential refused; registering with the agent token', { error: json.error });
    }
    const { status, json } = await this.call('registration', '/v1/runtimes', registration, this.config.token);
    if (status !== 201) throw this.refused('registration', status, json);
    const answer = this.accept(json);
    if (!answer.credential) throw new LinkFailure('registration without credential', 'registration answered no credential');
    this.credential = answer.credential;
    this.registered = true;
    this.mustRegister = false;
    await this.saveCredential();
    this.callbacks.log('registered', { fence: this.fence, heartbeatIntervalMs: this.intervalMs });
  }

  /**
   * Stops the tasks an answer revoked, in the background (a drain may take its grace period, and
   * heartbeats must go on meanwhile); a task already being revoked is not stopped twice.
   */
  private revokeListed(revoked: string[], reason: string): void {
    const fresh = [...new Set(revoked)].filter((taskId) => !this.revoking.has(taskId));
    if (fresh.length === 0) return;
    for (const taskId of fresh) this.revoking.add(taskId);
    this.callbacks
      .revoke(fresh, reason)
      .catch((error: unknown) => this.callbacks.log('revocation failed', { taskIds: fresh, error: error instanceof Error ? error.message : String(error) }))
      .finally(() => {
        for (const taskId of fresh) this.revoking.delete(taskId);
      });
  }

  /**
   * One heartbeat. 200: stop what it revokes. 409 stale-fence: stop what it revokes (and only
   * that), then register again. 404 (runtime unknown) or 401 (credential unknown or expired):
   * register again, stopping nothing; the next heartbeat's answer says what is revoked. Anything
   * else throws a LinkFailure, and stops nothing.
   */
  async beat(): Promise<void> {
    if (!this.credentialSaved) await this.saveCredential();
    if (this.credential === null) throw new LinkFailure('no credential', 'no credential: not registered');
    const { status, json } = await this.call('heartbeat', `/v1/runtimes/${this.config.id}/heartbeat`, {
      // a task's latency and throughput samples are evidence the control plane asks for, not lease traffic
      fence: this.fence,
      tasks: this.callbacks.reports().map(({ latencySamples: _latency, throughputSamples: _throughput, ...report }: TaskReport & { latencySamples?: unknown; throughputSamples?: unknown }) => report),
    }, this.credential);
    const { revoked } = HeartbeatAnswerSchema.catch({ revoked: [] }).parse(json);
    if (status === 200) {
      if (revoked.length) this.revokeListed(revoked, 'not placed on this runtime');
      return;
    }
    if (status === 409) {
      // Declared LOST or re-registered: the answer lists what recovery moved elsewhere. Only those stop.
      this.callbacks.log('fence refused; stopping the revoked tasks and registering again', { status, error: json.error, fence: this.fence, currentFence: json.currentFence, revoked });
      if (revoked.length) this.revokeListed(revoked, `revoked with a refused fence (${String(json.error)})`);
      this.mustRegister = true;
      await this.register();
      return;
    }
    if (status === 404 || (status === 401 && CREDENTIAL_REFUSED.has(String(json.error)))) {
      // The control plane does not know this runtime or credential (e.g. its database was replaced,
      // or the lease lapsed): register again. Nothing is stopped on such an answer, whatever it lists.
      this.callbacks.log('heartbeat refused; registering again, stopping nothing', { status, error: json.error });
      this.mustRegister = true;
      await this.register();
      return;
    }
    throw this.refused('heartbeat', status, json);
  }

  /** One exchange: a registration when one is due, else a heartbeat. */
  private async exchange(): Promise<void> {
    if (this.mustRegister) await this.register();
    else await this.beat();
  }

  private noteFailure(error: unknown): void {
    this.failures++;
    const kind = error instanceof LinkFailure ? error.kind : 'error';
    const message = error instanceof Error ? error.message : String(error);
    if (this.trouble?.kind === kind) return;
    this.trouble = { kind, since: this.trouble?.since ?? Date.now() };
    this.callbacks.log('control plane link failing; every task keeps running, retrying with backoff', { kind, error: message, registered: this.registered });
  }

  private noteSuccess(): void {
    if (this.trouble) {
      this.callbacks.log('control plane link restored', { failedAttempts: this.failures, downMs: Date.now() - this.trouble.since });
      this.trouble = null;
    }
    this.failures = 0;
  }

  /** The delay before the next exchange: the heartbeat interval, or the backoff after a failure. */
  private nextDelayMs(): number {
    if (this.failures === 0) return this.mustRegister ? 0 : this.intervalMs;
    return retryDelayMs(this.failures, this.retryBaseMs, Math.max(this.retryBaseMs, Math.min(this.retryMaxMs, this.intervalMs)));
  }

  /**
   * Registers and then heartbeats until stop(), in the background: it returns at once. Failures are
   * retried forever with backoff; none of them stops a task.
   */
  start(): void {
    const tick = async () => {
      this.timer = null;
      if (this.stopped) return;
      try {
        await this.exchange();
        this.noteSuccess();
      } catch (error) {
        this.noteFailure(error);
      }
      if (!this.stopped) this.timer = setTimeout(() => void tick(), this.nextDelayMs());
    };
    this.timer = setTimeout(() => void tick(), 0);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
