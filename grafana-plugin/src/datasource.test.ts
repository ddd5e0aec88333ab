import { DataSourceInstanceSettings, PluginType, ScopedVars } from '@grafana/data';
import { setTemplateSrv, TemplateSrv } from '@grafana/runtime';

import { DataSource, parseVariableQuery } from './datasource';
import { TailrootOptions, TailrootQuery } from './types';

const settings = {
  id: 1,
  uid: 'tailroot',
  type: 'tailroot-tailroot-datasource',
  name: 'tailroot',
  access: 'proxy',
  readOnly: false,
  jsonData: {},
  meta: {
    id: 'tailroot-tailroot-datasource',
    name: 'tailroot',
    type: PluginType.datasource,
    info: {} as never,
    module: '',
    baseUrl: '',
    backend: true,
  },
} as unknown as DataSourceInstanceSettings<TailrootOptions>;

function templateSrv(vars: Record<string, string>): TemplateSrv {
  return {
    replace: (target = '', _scoped?: ScopedVars) => target.replace(/\$(\w+)/g, (m, n) => vars[n] ?? m),
    getVariables: () => [],
    containsTemplate: (t?: string) => !!t && t.includes('$'),
    updateTimeRange: () => {},
  } as unknown as TemplateSrv;
}

describe('DataSource', () => {
  beforeEach(() => setTemplateSrv(templateSrv({ model: 'llama-8b', job: 'vllm' })));

  it('interpolates template variables before queries leave the browser', () => {
    const ds = new DataSource(settings);
    const q = ds.applyTemplateVariables(
      { refId: 'A', queryType: 'breakdown', selector: '{model_name="$model"}', quantile: 0.99 },
      {}
    );
    expect(q.selector).toBe('{model_name="llama-8b"}');
    expect(q.quantile).toBe(0.99);
  });

  it.each<[Partial<TailrootQuery>, boolean]>([
    [{ expr: 'up' }, true],
    [{ expr: '   ' }, false],
    [{ expr: 'up', hide: true }, false],
    [{ queryType: 'breakdown' }, true],
    [{ queryType: 'rootcause', target: '' }, false],
    [{ queryType: 'rootcause', target: 'x' }, true],
    [{ queryType: 'causal', outcome: 'y' }, false],
    [{ queryType: 'causal', outcome: 'y', treatment: 'x' }, true],
    [{ queryType: 'ab', a: '{a="1"}', b: '' }, false],
  ])('filterQuery(%j) = %s', (q, want) => {
    expect(new DataSource(settings).filterQuery({ refId: 'A', ...q })).toBe(want);
  });

  it('answers variable queries from the backend resources', async () => {
    const ds = new DataSource(settings);
    const calls: Array<[string, unknown]> = [];
    jest.spyOn(ds, 'getResource').mockImplementation(async (path: string, params?: unknown) => {
      calls.push([path, params]);
      return path === 'metrics' ? ['vllm:a', 'vllm:b', 'node_x'] : ['v1', 'v2'];
    });
    expect(await ds.metricFindQuery('label_values({job="$job"}, instance)')).toEqual([{ text: 'v1' }, { text: 'v2' }]);
    expect(calls[0]).toEqual(['label-values', { label: 'instance', 'match[]': '{job="vllm"}' }]);
    expect(await ds.metricFindQuery('metrics(^vllm:)')).toEqual([{ text: 'vllm:a' }, { text: 'vllm:b' }]);
    await ds.metricFindQuery('label_names()');
    expect(calls[2]).toEqual(['labels', undefined]);
    await expect(ds.metricFindQuery('series(up)')).rejects.toThrow('variable query "series(up)"');
  });
});

describe('parseVariableQuery', () => {
  it.each([
    ['label_names()', { kind: 'label_names', match: undefined }],
    ['label_names(up)', { kind: 'label_names', match: 'up' }],
    ['label_values(model_name)', { kind: 'label_values', label: 'model_name', match: undefined }],
    [
      ' label_values(vllm:num_requests_running{job="vllm"}, instance) ',
      { kind: 'label_values', label: 'instance', match: 'vllm:num_requests_running{job="vllm"}' },
    ],
    ['metrics()', { kind: 'metrics', regex: '.*' }],
    ['metrics(vllm:.*_bucket)', { kind: 'metrics', regex: 'vllm:.*_bucket' }],
  ])('%s', (q, want) => {
    expect(parseVariableQuery(q)).toEqual(want);
  });

  it('rejects other forms', () => {
    expect(() => parseVariableQuery('label_values(1bad)')).toThrow();
    expect(() => parseVariableQuery('query_result(up)')).toThrow();
  });
});
