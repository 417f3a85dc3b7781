// The API's handle on Temporal. The connection is lazy so the API starts (and reports not-ready)
// while Temporal is still coming up.
import { Client, Connection } from '@temporalio/client';

export interface TemporalGateway {
  client(): Promise<Client>;
  reachable(): Promise<boolean>;
  close(): Promise<void>;
}

export function createTemporalGateway(address: string, namespace: string): TemporalGateway {
  let connecting: Promise<Client> | null = null;
  let connection: Connection | null = null;
  const client = () => {
    connecting ??= Connection.connect({ address, connectTimeout: 2000 })
      .then((c) => {
        connection = c;
        return new Client({ connection: c, namespace });
      })
      .catch((error) => {
        connecting = null; // try again on the next call
        throw error;
      });
    return connecting;
  };
  return {
    client,
    async reachable() {
      try {
        const c = await client();
        await c.connection.workflowService.getSystemInfo({}, );
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      await connection?.close();
    },
  };
}
