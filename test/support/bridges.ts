// The host's bridge interface of a Docker network: dockerd names it br-<the network id's first 12
// characters> (the workload network sets no name of its own). Read through the engine's CLI.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

export function bridgeOf(dockerHost: string, network: string): string {
  const id = execFileSync('docker', ['network', 'inspect', '-f', '{{.Id}}', network], { env: { ...process.env, DOCKER_HOST: dockerHost }, encoding: 'utf8' }).trim();
  return `br-${id.slice(0, 12)}`;
}

export const bridgeExists = (bridge: string): boolean => fs.existsSync(`/sys/class/net/${bridge}`);
