// Real-browser test: Debian's chromium, driven by playwright-core, loads the
// harness page (the plugin's QueryEditor + a plot) served by the Go
// devserver, which runs the plugin backend in process against a real
// tailroot with the vLLM simulator. Asserts that the editor and the plotted
// series are visible, edits and re-runs a query, checks a per-query error
// from an attribution type, and saves a screenshot for the docs.
//
// Needs: harness/dist built (npm run build:harness), Go, /usr/bin/chromium
// (CHROMIUM to override). TAILROOT_BIN names a prebuilt tailroot.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const pluginDir = path.join(here, '..');
const repoRoot = path.join(pluginDir, '..');
const work = mkdtempSync(path.join(tmpdir(), 'tailroot-browser-'));
// The screenshot in the docs is refreshed only on request
// (UPDATE_SCREENSHOTS=1), so a test run leaves the working tree as it was.
const screenshot = process.env.UPDATE_SCREENSHOTS
  ? path.join(repoRoot, 'docs', 'images', 'plugin-query-editor.png')
  : path.join(work, 'plugin-query-editor.png');
const children = [];
let context;
let baseURL;
let trURL;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function start(bin, args) {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let logs = '';
  child.stdout.on('data', (d) => (logs += d));
  child.stderr.on('data', (d) => (logs += d));
  child.logs = () => logs;
  children.push(child);
  return child;
}

async function waitFor(what, fn, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      if (await fn()) {
        return;
      }
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

before(async () => {
  assert.ok(existsSync(path.join(pluginDir, 'harness', 'dist', 'harness.js')), 'run `npm run build:harness` first');
  // The server and the plugin are separate Go modules: each builds from its own root.
  const goBuild = (out, pkg, cwd) => execFileSync('go', ['build', '-o', out, pkg], { cwd, stdio: 'inherit' });
  const tailroot = process.env.TAILROOT_BIN || path.join(work, 'tailroot');
  if (!process.env.TAILROOT_BIN) {
    goBuild(tailroot, './cmd/tailroot', repoRoot);
  }
  const devserver = path.join(work, 'devserver');
  goBuild(devserver, './pkg/devserver', pluginDir);

  const trPort = await freePort();
  const tr = start(tailroot, ['serve', '--listen', `127.0.0.1:${trPort}`, '--data-dir', path.join(work, 'data'), '--simulate', '--log.level', 'warn']);
  trURL = `http://127.0.0.1:${trPort}`;
  // The simulator backfills an hour: wait until every instance has most of
  // it and a sample from the last minute.
  const ready = 'count((count_over_time(vllm:kv_cache_usage_perc[1h]) >= 200) and (time() - timestamp(vllm:kv_cache_usage_perc) < 60))';
  await waitFor('tailroot simulator data', async () => {
    const r = await fetch(`${trURL}/api/v1/query?query=${encodeURIComponent(ready)}`);
    const j = await r.json();
    return j.data?.result?.[0]?.value?.[1] === '6';
  }).catch((e) => {
    throw new Error(`${e.message}\n${tr.logs()}`);
  });

  const dsPort = await freePort();
  const ds = start(devserver, ['--listen', `127.0.0.1:${dsPort}`, '--tailroot', trURL, '--static', path.join(pluginDir, 'harness', 'dist')]);
  baseURL = `http://127.0.0.1:${dsPort}`;
  await waitFor('devserver', async () => (await fetch(`${baseURL}/api/datasources/uid/tailroot/health`)).ok).catch((e) => {
    throw new Error(`${e.message}\n${ds.logs()}`);
  });

  context = await chromium.launchPersistentContext(path.join(work, 'profile'), {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1220, height: 760 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

after(async () => {
  await context?.close();
  for (const c of children) {
    c.kill('SIGKILL');
  }
  rmSync(work, { recursive: true, force: true });
});

test('query editor and plotted series against a running tailroot', async () => {
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(baseURL + '/index.html');

  // The editor renders, in code mode, with the initial P99 query.
  const editor = page.getByTestId('tailroot-query-editor');
  await editor.waitFor({ state: 'visible' });
  const expr = page.getByLabel('PromQL or MetricsQL expression');
  assert.match(await expr.inputValue(), /^histogram_quantile\(0\.99/);

  // One P99 series per model is plotted, each with most of the 30 minutes
  // at the 30 s step (61 points when complete).
  const series = page.getByTestId('plot-series');
  await waitFor('plotted series', async () => (await series.count()) >= 2, 30_000);
  const names = await series.evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
  for (const model of ['meta-llama/Llama-3.1-70B-Instruct', 'meta-llama/Llama-3.1-8B-Instruct']) {
    assert.ok(names.includes(model), `no series for ${model} in ${names}`);
  }
  for (const n of await series.evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-points'))))) {
    assert.ok(n >= 50, `series has ${n} points`);
  }
  assert.ok(await page.getByTestId('plot').isVisible());
  assert.equal(await page.getByTestId('legend-item').count(), names.length);

  // Autocompletion reached the server through the backend's resources.
  await page.getByLabel('Metric', { exact: true }).click();
  await page.getByText('vllm:num_requests_running', { exact: true }).waitFor({ state: 'visible' });
  await page.keyboard.press('Escape');

  await page.screenshot({ path: screenshot, fullPage: true });

  // Edit the expression (a $variable included) and run it with Shift+Enter.
  const runsBefore = Number(await page.getByTestId('result-panel').getAttribute('data-runs'));
  await expr.fill('sum by (instance) (vllm:num_requests_running{model_name="$model"})');
  await expr.press('Shift+Enter');
  await waitFor('the edited query to run', async () => {
    const runs = Number(await page.getByTestId('result-panel').getAttribute('data-runs'));
    return runs > runsBefore && (await series.count()) === 3;
  }, 30_000);
  const instances = await series.evaluateAll((els) => els.map((e) => e.getAttribute('data-name')).sort());
  // Grafana names a series with a single label by the label's value.
  assert.deepEqual(instances, [
    'llama-3-1-8b-instruct-0:8000',
    'llama-3-1-8b-instruct-1:8000',
    'llama-3-1-8b-instruct-2:8000',
  ]);

  // Switching to the breakdown builder runs a breakdown query. A server
  // without the endpoint must produce the clear per-query error.
  const runsBeforeBreakdown = Number(await page.getByTestId('result-panel').getAttribute('data-runs'));
  await page.getByLabel('Breakdown').click();
  await page.getByTestId('tailroot-breakdown-editor').waitFor({ state: 'visible' });
  await waitFor('the breakdown query to run', async () => {
    return Number(await page.getByTestId('result-panel').getAttribute('data-runs')) > runsBeforeBreakdown;
  }, 30_000);
  const probe = await fetch(`${trURL}/api/v1/attribution/breakdown`);
  if (probe.status === 404) {
    assert.match(await page.getByTestId('query-error').innerText(), /^this tailroot server does not support breakdown yet$/);
  }

  assert.deepEqual(pageErrors, []);
});
