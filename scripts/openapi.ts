// Prints the API's OpenAPI document as GET /openapi.json answers it, built from the route
// declarations without a running stack (api/server.ts offlineApiDocument). `npm run lint:openapi`
// writes it to dist/openapi.json and lints it (redocly.yaml).
//
//   tsx scripts/openapi.ts [--out FILE]     SCALEGATE_API_URL (or _HOST/_PORT) sets its server
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { offlineApiDocument } from '../api/server';

const { values } = parseArgs({ options: { out: { type: 'string' } } });
const text = `${JSON.stringify(offlineApiDocument(process.env), null, 2)}\n`;
if (values.out) {
  fs.mkdirSync(path.dirname(values.out), { recursive: true });
  fs.writeFileSync(values.out, text);
} else {
  process.stdout.write(text);
}
