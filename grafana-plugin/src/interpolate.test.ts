import { ScopedVars } from '@grafana/data';

import { escapeRegex, interpolateQuery, promRegexFormat, Replacer } from './interpolate';
import { TailrootQuery } from './types';

/**
 * A TemplateSrv stand-in with the semantics that matter here: $name and
 * ${name} are replaced, the format function receives a multi-value
 * variable as an array, scoped variables win over dashboard ones.
 */
function fakeSrv(vars: Record<string, string | string[]>): Replacer {
  return {
    replace(target = '', scopedVars?: ScopedVars, format?: string | Function) {
      return target.replace(/\$\{(\w+)\}|\$(\w+)/g, (m, a, b) => {
        const name = a ?? b;
        const scoped = scopedVars?.[name]?.value as string | string[] | undefined;
        const v = scoped ?? vars[name];
        if (v === undefined) {
          return m;
        }
        return typeof format === 'function' ? format(v) : Array.isArray(v) ? v.join(',') : v;
      });
    },
  };
}

describe('interpolateQuery', () => {
  const srv = fakeSrv({ model: 'llama-8b', instance: ['gpu-0', 'gpu-1'], q: '0.99' });

  it('replaces variables in every string field a query type uses', () => {
    const q: TailrootQuery = {
      refId: 'A',
      queryType: 'promql',
      expr: 'rate(vllm:e2e_request_latency_seconds_count{model_name="$model"}[5m])',
      legendFormat: '{{instance}} $model',
      selector: '{model_name="${model}"}',
      target: 'x{model_name="$model"}',
      a: '{instance="$model"}',
      confounders: ['load{model_name="$model"}', 'gpu'],
    };
    const out = interpolateQuery(q, srv);
    expect(out.expr).toBe('rate(vllm:e2e_request_latency_seconds_count{model_name="llama-8b"}[5m])');
    expect(out.legendFormat).toBe('{{instance}} llama-8b');
    expect(out.selector).toBe('{model_name="llama-8b"}');
    expect(out.target).toBe('x{model_name="llama-8b"}');
    expect(out.a).toBe('{instance="llama-8b"}');
    expect(out.confounders).toEqual(['load{model_name="llama-8b"}', 'gpu']);
    // The input is not modified.
    expect(q.expr).toContain('$model');
  });

  it('renders multi-value variables as an escaped regex alternation', () => {
    const out = interpolateQuery({ refId: 'A', expr: 'up{instance=~"$instance"}' }, srv);
    expect(out.expr).toBe('up{instance=~"(gpu-0|gpu-1)"}');
  });

  it('prefers scoped variables (repeated panels)', () => {
    const out = interpolateQuery({ refId: 'A', expr: 'up{model_name="$model"}' }, srv, {
      model: { text: 'other', value: 'other' },
    });
    expect(out.expr).toBe('up{model_name="other"}');
  });

  it('leaves numbers and unknown variables alone', () => {
    const out = interpolateQuery({ refId: 'A', quantile: 0.99, expr: 'up{a="$nope"}' }, srv);
    expect(out.quantile).toBe(0.99);
    expect(out.expr).toBe('up{a="$nope"}');
  });
});

describe('promRegexFormat', () => {
  it('keeps one value as is and escapes regex metacharacters of several', () => {
    expect(promRegexFormat('a.b')).toBe('a.b');
    expect(promRegexFormat(['a.b'])).toBe('a.b');
    // In a PromQL string, a regex backslash is written twice: "a\\.b".
    expect(promRegexFormat(['a.b', 'c|d'])).toBe('(a\\\\.b|c\\\\|d)');
    expect(escapeRegex('x+(y)')).toBe('x\\\\+\\\\(y\\\\)');
  });
});
