// What `npm start` does about containers (embedded/container-engine.ts containersChoice): off on
// request, the user's engine when DOCKER_HOST names one, else its own when Docker is here.
import { containersChoice } from '../../embedded/container-engine';

const installed = () => null;
const notInstalled = () => 'dockerd is not installed (apt-get install docker.io docker-registry busybox-static)';

describe('containersChoice', () => {
  it('starts an engine and a registry of its own when Docker is here and no engine is named', () => {
    expect(containersChoice({ SCALEGATE_CONTAINERS: 'on' }, installed)).toEqual({ embedded: true });
  });

  it('is off, saying what is missing, when Docker is not here', () => {
    expect(containersChoice({ SCALEGATE_CONTAINERS: 'on' }, notInstalled)).toEqual({ off: notInstalled() });
  });

  it('uses the engine DOCKER_HOST names (SCALEGATE_DOCKER_HOST first), whatever is installed here', () => {
    expect(containersChoice({ SCALEGATE_CONTAINERS: 'on', DOCKER_HOST: 'unix:///run/docker.sock' }, notInstalled)).toEqual({ yours: 'unix:///run/docker.sock' });
    expect(containersChoice({ SCALEGATE_CONTAINERS: 'on', SCALEGATE_DOCKER_HOST: 'unix:///a.sock', DOCKER_HOST: 'unix:///b.sock' }, installed)).toEqual({ yours: 'unix:///a.sock' });
  });

  it('is off when SCALEGATE_CONTAINERS=off, even with an engine named', () => {
    expect(containersChoice({ SCALEGATE_CONTAINERS: 'off', DOCKER_HOST: 'unix:///run/docker.sock' }, installed)).toEqual({ off: 'SCALEGATE_CONTAINERS=off' });
  });
});
