// The Temporal Web UI in a real headless browser (Debian's chromium driven by playwright-core;
// .ci/run installs it), as the e2e tests read it: one page, whose text (frames included) is read
// until what a test expects shows. Screenshots go to test/e2e/artifacts/ (gitignored).
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { waitFor } from '../../harness/wait-for';

export const ARTIFACTS = path.resolve(__dirname, '../e2e/artifacts');
const CHROMIUM_CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/lib/chromium/chromium', '/usr/bin/chromium', '/usr/bin/chromium-browser'];

function chromiumPath(): string {
  const found = CHROMIUM_CANDIDATES.find((candidate) => candidate && fs.existsSync(candidate));
  if (!found) {
    throw new Error(`no Chromium found (looked at ${CHROMIUM_CANDIDATES.filter(Boolean).join(', ')}): install Debian's package (apt-get install chromium; .ci/run does) or set CHROMIUM_PATH`);
  }
  return found;
}

export interface UiBrowser {
  browser: Browser;
  page: Page;
  /** The page's text, frames included: the UI renders summaries and details (Temporal markdown) in sandboxed iframes of their own. */
  bodyText(): Promise<string>;
  /**
   * Reads `url` until every one of `expected` shows on the page, then screenshots it; fails naming
   * the ones that never showed. The UI is a single-page app that renders after its data fetches and
   * reads Temporal as it changes: the page text is read every 250 ms, the page reloaded every 3 s.
   */
  openUntil(url: string, expected: (string | RegExp)[], screenshot: string): Promise<string>;
  close(): Promise<void>;
}

export async function openBrowser(): Promise<UiBrowser> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--disable-dev-shm-usage'] });
  const page = await browser.newPage({ viewport: { width: 1600, height: 1100 } });
  const bodyText = async () => (await Promise.all(page.frames().map((frame) => frame.innerText('body').catch(() => '')))).join('\n');
  async function openUntil(url: string, expected: (string | RegExp)[], screenshot: string): Promise<string> {
    let last = '';
    let loadedAt = 0;
    const missing = () => expected.filter((e) => (typeof e === 'string' ? !last.includes(e) : !e.test(last)));
    await waitFor(`${expected.map(String).join(', ')} on ${url}`, async () => {
      if (page.url() !== url) await page.goto(url, { waitUntil: 'domcontentloaded' });
      else if (Date.now() - loadedAt >= 3_000) await page.reload({ waitUntil: 'domcontentloaded' });
      else {
        last = await bodyText();
        return missing().length === 0;
      }
      loadedAt = Date.now();
      last = await bodyText();
      return missing().length === 0;
    }, { timeoutMs: 60_000, intervalMs: 250, context: () => `never shown: ${missing().map(String).join(', ')}\npage text:\n${last.slice(0, 3000)}` });
    await page.screenshot({ path: path.join(ARTIFACTS, screenshot), fullPage: true });
    return last;
  }
  return { browser, page, bodyText, openUntil, close: () => browser.close() };
}
