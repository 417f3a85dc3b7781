// The Temporal server settings scalegate relies on come from one file: the embedded dev server gets
// them as flags, and docker-compose.yml mounts the same file into its server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { DYNAMIC_CONFIG_FILE, dynamicConfigFlags } from '../../embedded/temporal-server';

const REPO = path.resolve(__dirname, '../..');

describe('Temporal dynamic config', () => {
  it('gives the dev server eager activity dispatch', () => {
    const flags = dynamicConfigFlags();
    const values = flags.filter((_, i) => flags[i - 1] === '--dynamic-config-value');
    expect(values).toContain('system.enableActivityEagerExecution=true');
    expect(flags.length).toBe(values.length * 2);
  });

  it('is the file docker-compose mounts into its Temporal server, at the path the server is told to read', () => {
    const compose = YAML.parse(fs.readFileSync(path.join(REPO, 'docker-compose.yml'), 'utf8'));
    const temporal = compose.services.temporal;
    const mount = (temporal.volumes as string[]).map((v) => v.split(':')).find(([source]) => path.resolve(REPO, source) === DYNAMIC_CONFIG_FILE);
    expect(mount).toBeDefined();
    // auto-setup runs in /etc/temporal and reads DYNAMIC_CONFIG_FILE_PATH relative to it
    expect(path.posix.join('/etc/temporal', temporal.environment.DYNAMIC_CONFIG_FILE_PATH)).toBe(mount![1]);
  });

  it('refuses a setting a flag cannot carry (constraints, several values)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dynamic-config-'));
    const file = path.join(dir, 'config.yaml');
    fs.writeFileSync(file, 'matching.numTaskqueueReadPartitions:\n  - value: 1\n    constraints:\n      taskQueueName: q\n');
    expect(() => dynamicConfigFlags(file)).toThrow(/exactly one value without constraints/);
    fs.writeFileSync(file, 'limit.maxIDLength:\n  - value: 1\n  - value: 2\n');
    expect(() => dynamicConfigFlags(file)).toThrow(/exactly one value without constraints/);
    fs.rmSync(dir, { recursive: true });
  });
});
