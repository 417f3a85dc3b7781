// The demo's sample service (`npm start -- --demo`): a tiny HTTP server on PORT that answers
// GET /healthz (readiness) and GET / with who it is. SIGTERM closes it cleanly.
'use strict';
const http = require('node:http');

const port = Number(process.env.PORT);
if (!Number.isInteger(port) || port <= 0) {
  console.error('demo web: PORT is not set');
  process.exit(2);
}
const startedAt = new Date().toISOString();
const server = http.createServer((request, response) => {
  if (request.url === '/healthz') {
    response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    return;
  }
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ service: 'demo-web', port, pid: process.pid, startedAt }));
});
server.listen(port, '127.0.0.1');
process.once('SIGTERM', () => server.close(() => process.exit(0)));
