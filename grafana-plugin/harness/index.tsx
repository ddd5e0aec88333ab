import { createTheme, DataFrame, DataQueryRequest, dateTime, ScopedVars, ThemeContext } from '@grafana/data';
import { setBackendSrv, setTemplateSrv, TemplateSrv } from '@grafana/runtime';
import { GlobalStyles } from '@grafana/ui';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';

import { QueryEditor } from '../src/components/QueryEditor';
import { DataSource } from '../src/datasource';
import { plugin } from '../src/module';
import pluginJson from '../src/plugin.json';
import { TailrootQuery } from '../src/types';
import { harnessBackendSrv } from './backendSrv';
import { Panel } from './Panels';

/**
 * The browser-test harness: the plugin's QueryEditor and a plot of what the
 * plugin's own query path returns. Queries go DataSource.query →
 * DataSourceWithBackend → POST /api/ds/query on the devserver → the Go
 * backend's QueryData → tailroot, so every layer between the editor and the
 * server is the real one except Grafana's HTTP routing.
 */

const dashboardVars: Record<string, string> = { model: 'meta-llama/Llama-3.1-8B-Instruct', __rate_interval: '2m' };

const templateSrv = {
  replace(target = '', scopedVars?: ScopedVars, format?: string | Function) {
    return target.replace(/\$\{(\w+)\}|\$(\w+)/g, (m, a, b) => {
      const name = (a ?? b) as string;
      const v = (scopedVars?.[name]?.value as string | undefined) ?? dashboardVars[name];
      if (v === undefined) {
        return m;
      }
      return typeof format === 'function' ? format(v) : v;
    });
  },
  getVariables: () => [],
  containsTemplate: (t?: string) => !!t && /\$\w/.test(t),
  updateTimeRange: () => {},
} as unknown as TemplateSrv;

setBackendSrv(harnessBackendSrv);
setTemplateSrv(templateSrv);

const ds = new DataSource({
  id: 1,
  uid: 'tailroot',
  type: pluginJson.id,
  name: 'tailroot',
  access: 'proxy',
  readOnly: false,
  jsonData: {},
  meta: { ...(pluginJson as object), module: '', baseUrl: '' },
} as never);

// The page's URL may set the query (?query=<TailrootQuery JSON>) and the
// time range (?from=&to=, Unix milliseconds), as a dashboard panel's link
// would: the docs walkthrough's screenshots open the same page that way.
const params = new URLSearchParams(window.location.search);

const initial: TailrootQuery = params.get('query')
  ? { refId: 'A', ...(JSON.parse(params.get('query')!) as Partial<TailrootQuery>) }
  : {
      refId: 'A',
      queryType: 'promql',
      expr: 'histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[$__rate_interval])))',
      legendFormat: '{{model_name}}',
      range: true,
      format: 'time_series',
    };

function timeRange() {
  const to = params.get('to') ? dateTime(Number(params.get('to'))) : dateTime();
  const from = params.get('from') ? dateTime(Number(params.get('from'))) : dateTime(to.valueOf() - 30 * 60 * 1000);
  return { from, to };
}

function App() {
  const [query, setQuery] = useState<TailrootQuery>(initial);
  // Grafana's onRunQuery runs the query as last changed, even when onChange
  // and onRunQuery come in the same event: keep it outside React's state.
  const latest = useRef<TailrootQuery>(initial);
  const onChange = (q: TailrootQuery) => {
    latest.current = q;
    setQuery(q);
  };
  const [frames, setFrames] = useState<DataFrame[]>([]);
  const [error, setError] = useState<string | undefined>();
  const [runs, setRuns] = useState(0);
  const theme = useMemo(() => createTheme({ colors: { mode: 'dark' } }), []);

  const run = useCallback((q: TailrootQuery) => {
    const { from, to } = timeRange();
    const request = {
      requestId: 'harness',
      app: 'harness',
      timezone: 'utc',
      range: { from, to, raw: { from: from.toISOString(), to: to.toISOString() } },
      interval: '30s',
      intervalMs: 30000,
      maxDataPoints: 600,
      targets: [q],
      scopedVars: {},
      startTime: Date.now(),
    } as unknown as DataQueryRequest<TailrootQuery>;
    const sub = ds.query(request).subscribe({
      next: (res) => {
        setFrames(res.data as DataFrame[]);
        setError(res.errors?.map((e) => e.message).join('; ') || res.error?.message);
        setRuns((n) => n + 1);
      },
      error: (e: unknown) => setError(String(e)),
    });
    return () => sub.unsubscribe();
  }, []);

  useEffect(() => run(initial), [run]);

  return (
    <ThemeContext.Provider value={theme}>
      <GlobalStyles />
      <h1>tailroot datasource — {plugin.meta?.name ?? pluginJson.name}</h1>
      <section data-testid="editor-panel">
        <QueryEditor query={query} onChange={onChange} onRunQuery={() => run(latest.current)} datasource={ds} />
      </section>
      <section data-testid="result-panel" data-runs={runs}>
        {error && (
          <div data-testid="query-error" style={{ color: '#f2495c' }}>
            {error}
          </div>
        )}
        <Panel frames={frames} />
      </section>
    </ThemeContext.Provider>
  );
}

createRoot(document.getElementById('root')!).render(<App />);
