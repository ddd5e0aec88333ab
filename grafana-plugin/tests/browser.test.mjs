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
import { mkdirSync, mkdtempSync, existsSync, rmSync } from 'node:fs';
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
// The walkthrough's screenshots (docs/walkthrough.md), refreshed on the
// same request into docs/images/walkthrough/.
const walkthroughDir = process.env.UPDATE_SCREENSHOTS ? path.join(repoRoot, 'docs', 'images', 'walkthrough') : path.join(work, 'walkthrough');
// The scheduled incident: make run's (minute 40–50 of every hour) when the
// docs' screenshots are refreshed, so they show what make run shows; a
// 20-minute schedule otherwise, so an incident with its lead-in is inside
// the simulator's hour of backfill whatever the time of the run.
const schedule = process.env.UPDATE_SCREENSHOTS ? { every: 60, at: 40, dur: 10, lead: 20 } : { every: 20, at: 12, dur: 6, lead: 10 };
const faultyInstance = 'llama-3-1-8b-instruct-0:8000';
const smallModel = 'meta-llama/Llama-3.1-8B-Instruct';
let started;
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
  started = Date.now();
  const tr = start(tailroot, [
    'serve',
    '--listen',
    `127.0.0.1:${trPort}`,
    '--data-dir',
    path.join(work, 'data'),
    '--simulate',
    `--simulate.incident-every=${schedule.every}m`,
    `--simulate.incident-at=${schedule.at}m`,
    `--simulate.incident-for=${schedule.dur}m`,
    '--log.level',
    'warn',
  ]);
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

// promRange runs a range query on tailroot itself: the independent values
// the panels are checked against.
async function promRange(expr, from, to, step = 30) {
  const q = new URLSearchParams({ query: expr, start: String(from / 1000), end: String(to / 1000), step: String(step) });
  const j = await (await fetch(`${trURL}/api/v1/query_range?${q}`)).json();
  assert.equal(j.status, 'success', JSON.stringify(j));
  return j.data.result;
}

async function openPanel(query, from, to) {
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const q = new URLSearchParams({ query: JSON.stringify(query), from: String(from), to: String(to) });
  await page.goto(`${baseURL}/index.html?${q}`);
  await waitFor('the panel query to run', async () => Number(await page.getByTestId('result-panel').getAttribute('data-runs')) > 0, 60_000);
  const err = page.getByTestId('query-error');
  assert.equal(await err.count(), 0, (await err.count()) ? await err.innerText() : '');
  return { page, pageErrors };
}

test('walkthrough: P99 TTFT jumps at the scheduled incident, the breakdown says which stage, the root cause why', async () => {
  // The newest incident that ended a minute ago, with its lead-in.
  const min = 60_000;
  const period = Math.floor((Date.now() - (schedule.at + schedule.dur + 1) * min) / (schedule.every * min)) * schedule.every * min;
  const incident = period + schedule.at * min;
  const from = incident - schedule.lead * min;
  const to = Math.min(incident + (schedule.dur + 5) * min, Date.now());
  assert.ok(
    from >= started - 60 * min,
    `the incident at ${new Date(incident).toISOString()} with its ${schedule.lead} min lead-in is not in the simulator's hour of backfill: ` +
      'with UPDATE_SCREENSHOTS=1 (make run\'s schedule) run between minute 51 and minute 20',
  );
  const shots = [];

  // 1. P99 TTFT per 8B instance: the faulty one jumps during the incident.
  const p99 = `histogram_quantile(0.99, sum by (le, instance) (rate(vllm:time_to_first_token_seconds_bucket{model_name="${smallModel}"}[1m])))`;
  {
    const { page, pageErrors } = await openPanel({ queryType: 'promql', expr: p99, legendFormat: '{{instance}}', range: true, format: 'time_series' }, from, to);
    const series = page.getByTestId('plot-series');
    await waitFor('three P99 series', async () => (await series.count()) === 3, 30_000);
    const names = await series.evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
    assert.ok(names.includes(faultyInstance), `no series for ${faultyInstance} in ${names}`);
    const faulty = (await promRange(p99, from, to)).find((r) => r.metric.instance === faultyInstance);
    const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const before = median(faulty.values.filter(([t]) => t * 1000 < incident - min).map(([, v]) => Number(v)));
    const during = median(faulty.values.filter(([t]) => t * 1000 > incident + 2 * min && t * 1000 < incident + schedule.dur * min).map(([, v]) => Number(v)));
    assert.ok(during > 1.5 * before, `P99 TTFT of ${faultyInstance}: median ${during} s during the incident, ${before} s before: no jump`);
    console.log(`walkthrough: P99 TTFT of ${faultyInstance} ${before.toFixed(3)} s before, ${during.toFixed(3)} s during the incident at ${new Date(incident).toISOString()}`);
    shots.push([page, 'p99-ttft.png']);
    assert.deepEqual(pageErrors, []);
  }

  // 2. Which stage: the P99 TTFT breakdown of the faulty instance's
  // requests during the incident; the bar adds up to what /breakdown
  // answers, and queue or prefill is its largest stage.
  const incFrom = incident;
  const incTo = incident + schedule.dur * min;
  const selector = `{instance="${faultyInstance}"}`;
  {
    const { page, pageErrors } = await openPanel({ queryType: 'breakdown', selector, metric: 'ttft', quantile: 0.99, method: 'auto', view: 'stages' }, incFrom, incTo);
    const bar = page.getByTestId('bar-panel');
    await bar.waitFor({ state: 'visible' });
    const q = new URLSearchParams({ selector, metric: 'ttft', start: String(incFrom / 1000), end: String(incTo / 1000) });
    const j = await (await fetch(`${trURL}/api/v1/attribution/breakdown?${q}`)).json();
    assert.equal(j.status, 'success', JSON.stringify(j));
    const total = Number(await bar.getAttribute('data-total'));
    const want = j.data.stages.reduce((a, s) => a + Math.max(s.contribution_seconds, 0), 0);
    assert.ok(Math.abs(total - want) < 1e-6 * Math.max(want, 1), `bar adds up to ${total} s, /breakdown's stages to ${want} s`);
    const top = [...j.data.stages].sort((a, b) => b.contribution_seconds - a.contribution_seconds)[0];
    console.log(`walkthrough: P99 TTFT ${j.data.quantile_seconds} s, tail mean ${j.data.target_seconds} s, largest stage ${top.stage} ${top.contribution_seconds} s`);
    // A GPU throttle slows prefill, and requests queue behind it: one of
    // the two is most of the TTFT tail, not the CPU-side tokenize.
    assert.ok(['queue', 'prefill'].includes(top.stage), `largest stage of the TTFT tail during the incident: ${JSON.stringify(j.data.stages)}`);
    shots.push([page, 'breakdown.png']);
    assert.deepEqual(pageErrors, []);
  }

  // 3. Why: the root-cause ranking of the faulty instance's P99 TTFT over
  // the lead-in and the incident puts its GPU's SM clock first; 4. the
  // same as the serving graph.
  const target = `histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{instance="${faultyInstance}"}[1m])))`;
  {
    const { page, pageErrors } = await openPanel({ queryType: 'rootcause', target, view: 'ranking', alpha: 0.05 }, from, incTo);
    const rows = page.getByTestId('table-row');
    await waitFor('the ranking', async () => (await rows.count()) > 0, 60_000);
    const first = await rows.first().innerText();
    // Discovered candidates keep every label of their series (gpu, job,
    // model_name, …): the metric and its instance are what identify it.
    assert.match(first, new RegExp(`DCGM_FI_DEV_SM_CLOCK\\{[^}]*\\binstance="${faultyInstance.replace(/[.]/g, '\\.')}"[^}]*\\}`), `first row: ${first}`);
    shots.push([page, 'rootcause-table.png']);
    assert.deepEqual(pageErrors, []);
  }
  {
    const { page, pageErrors } = await openPanel({ queryType: 'rootcause', target, view: 'graph', alpha: 0.05 }, from, incTo);
    const nodes = page.getByTestId('graph-node');
    await waitFor('the graph', async () => (await nodes.count()) > 0, 60_000);
    const kinds = await nodes.evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')));
    assert.ok(kinds.includes('gpu') && kinds.includes('target'), `node kinds ${kinds}`);
    shots.push([page, 'rootcause-graph.png']);
    assert.deepEqual(pageErrors, []);
  }

  mkdirSync(walkthroughDir, { recursive: true });
  for (const [page, name] of shots) {
    await page.screenshot({ path: path.join(walkthroughDir, name), fullPage: true });
    await page.close();
  }
});
