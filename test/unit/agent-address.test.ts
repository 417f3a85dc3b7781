// A node is a host (issue 35 item 1, DESIGN.md §7): the agent's bind address (--bind,
// SCALEGATE_AGENT_BIND) and the address it advertises (--advertise, SCALEGATE_AGENT_ADVERTISE)
// parsed once, and every address built from them. Pure: nothing is bound.
import { advertisedHost, agentEndpoint, parseAgentConfig } from '../../agent/config';
import { probeHostOf } from '../../agent/drivers/process-probes';
import { taskEnvironment } from '../../agent/drivers/process-spawn';

const env = { SCALEGATE_AGENT_TOKEN: 'agent-token-0123456789abcdef', SCALEGATE_AGENT_ID: 'n1', SCALEGATE_AGENT_PORT: '7401' };

describe('agent address', () => {
  test('defaults to loopback: binds, advertises and is reached at 127.0.0.1', () => {
    const config = parseAgentConfig([], env);
    expect(config.host).toBe('127.0.0.1');
    expect(advertisedHost(config)).toBe('127.0.0.1');
    expect(agentEndpoint(config)).toBe('http://127.0.0.1:7401');
    expect(probeHostOf({ taskBindHost: config.host })).toBe('127.0.0.1');
  });

  test('--bind and --advertise set the bind address and the endpoint; flags win over the environment', () => {
    const config = parseAgentConfig(['--bind', '10.20.0.11', '--advertise', 'node-1.internal'], { ...env, SCALEGATE_AGENT_BIND: '10.9.9.9' });
    expect(config.host).toBe('10.20.0.11');
    expect(agentEndpoint(config)).toBe('http://node-1.internal:7401');
  });

  test('SCALEGATE_AGENT_BIND alone: the node advertises its bind address', () => {
    const config = parseAgentConfig([], { ...env, SCALEGATE_AGENT_BIND: '10.20.0.12' });
    expect(agentEndpoint(config)).toBe('http://10.20.0.12:7401');
    expect(probeHostOf({ taskBindHost: config.host })).toBe('10.20.0.12');
  });

  test('a wildcard bind advertises loopback unless told otherwise; IPv6 is bracketed in the URL', () => {
    expect(agentEndpoint(parseAgentConfig(['--bind', '0.0.0.0'], env))).toBe('http://127.0.0.1:7401');
    expect(agentEndpoint(parseAgentConfig(['--bind', '0.0.0.0', '--advertise', '10.20.0.13'], env))).toBe('http://10.20.0.13:7401');
    expect(agentEndpoint(parseAgentConfig(['--bind', 'fd00::11'], env))).toBe('http://[fd00::11]:7401');
    expect(probeHostOf({ taskBindHost: '0.0.0.0' })).toBe('127.0.0.1');
  });

  test("a process task is told the node's address as BIND_HOST", () => {
    const ports = { public: 21001, internal: 21002 };
    const identity = { taskId: 't-1', incarnation: 'i-1' };
    expect(taskEnvironment({ env: {} }, ports, identity, { agentEnvironment: {}, bindHost: '10.20.0.11' })).toMatchObject({ BIND_HOST: '10.20.0.11', PORT: '21001' });
    expect(taskEnvironment({ env: {} }, ports, identity, { agentEnvironment: {} })).not.toHaveProperty('BIND_HOST');
  });
});
