// Keeps one service process running: an unexpected exit is logged and the process is started again
// after a backoff that doubles up to a ceiling and resets once a run has stayed up for a while. A
// crashed API, worker or agent therefore never takes the rest of the embedded stack down.
import type { ServiceProcess } from './processes';

export interface SupervisorOptions {
  name: string;
  /** starts one run of the service */
  start(): ServiceProcess;
  log(line: string): void;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** a run that lasted this long counts as healthy: the next crash starts from the initial backoff */
  healthyAfterMs?: number;
}

export interface Supervised {
  readonly name: string;
  /** the current run (replaced on every restart) */
  current(): ServiceProcess;
  /** how many times the service was restarted after an unexpected exit */
  restarts(): number;
  /** stops the current run and restarts no more */
  stop(graceMs?: number): Promise<void>;
}

export function supervise(options: SupervisorOptions): Supervised {
  const initial = options.initialBackoffMs ?? 500;
  const ceiling = options.maxBackoffMs ?? 15_000;
  const healthyAfter = options.healthyAfterMs ?? 30_000;
  let stopped = false;
  let restarts = 0;
  let backoff = initial;
  let restartTimer: NodeJS.Timeout | null = null;
  let run = launch();

  function launch(): ServiceProcess {
    const startedAt = Date.now();
    const service = options.start();
    void service.exited.then((code) => {
      if (stopped) return;
      if (Date.now() - startedAt >= healthyAfter) backoff = initial;
      options.log(`${options.name} exited with ${code ?? service.child.signalCode}; restarting in ${backoff} ms`);
      restartTimer = setTimeout(() => {
        restartTimer = null;
        if (stopped) return;
        restarts += 1;
        run = launch();
      }, backoff);
      backoff = Math.min(ceiling, backoff * 2);
    });
    return service;
  }

  return {
    name: options.name,
    current: () => run,
    restarts: () => restarts,
    async stop(graceMs?: number) {
      stopped = true;
      if (restartTimer) clearTimeout(restartTimer);
      await run.stop(graceMs);
    },
  };
}
