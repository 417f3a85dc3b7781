import { taskEnvironment } from '../../agent/drivers/process-spawn';

const ports = { public: 9001, internal: 9002 };
const identity = { taskId: 'pay-1', incarnation: 'i-1' };
const agentEnvironment = { PATH: '/usr/bin', SCALEGATE_KAFKA_BROKERS: '10.0.0.1:9092', DATABASE_URL: 'postgres://secret' };

describe('a process task\'s environment', () => {
  it('gives a service that declares no consumer group nothing of Kafka, whatever the agent holds', () => {
    expect(taskEnvironment({ env: {} }, ports, identity, { agentEnvironment, kafkaBrokers: '10.0.0.1:9092' })).toEqual({
      PATH: '/usr/bin', PORT: '9001', INTERNAL_PORT: '9002', SCALEGATE_TASK_ID: 'pay-1', SCALEGATE_INCARNATION: 'i-1',
    });
  });

  it('gives a service in its own consumer group the agent\'s brokers, its topic and its group; its env may name other brokers, never another identity', () => {
    const kafka = { topic: 'orders', group: 'payments' };
    expect(taskEnvironment({ env: {}, kafka }, ports, identity, { agentEnvironment, kafkaBrokers: '10.0.0.1:9092' })).toMatchObject({
      SCALEGATE_KAFKA_BROKERS: '10.0.0.1:9092', SCALEGATE_KAFKA_TOPIC: 'orders', SCALEGATE_KAFKA_GROUP: 'payments',
    });
    const own = taskEnvironment({ env: { SCALEGATE_KAFKA_BROKERS: 'mine:9092', SCALEGATE_TASK_ID: 'forged' }, kafka }, ports, identity, { agentEnvironment });
    expect(own).toMatchObject({ SCALEGATE_KAFKA_BROKERS: 'mine:9092', SCALEGATE_TASK_ID: 'pay-1' });
    expect(own.DATABASE_URL).toBeUndefined();
  });
});
