// Provisions the Kubernetes runtime's test control plane into the cache (embedded/kubernetes.ts:
// already there, else the prebuilt tarball, else compiled from the Go module proxy) and prints
// where it is and what it came from. Used by .ci/run; seconds when the cache holds it.
import { ensureKubernetes, KUBERNETES_VERSION } from '../embedded/kubernetes';

const started = Date.now();
try {
  const install = ensureKubernetes((line) => console.error(`[kubernetes] ${line}`));
  console.log(`${install.dir}\tKubernetes ${KUBERNETES_VERSION}, etcd, kwok\tfrom ${install.source}\t${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (error) {
  console.error(`[kubernetes] ${(error as Error).message}`);
  process.exit(1);
}
