import { DataSourceInstanceSettings, MetricFindValue, ScopedVars } from '@grafana/data';
import { DataSourceWithBackend, getTemplateSrv } from '@grafana/runtime';

import { interpolateQuery } from './interpolate';
import { DEFAULT_QUERY, TailrootOptions, TailrootQuery } from './types';

/**
 * DataSource runs every query through the Go backend (/api/ds/query), after
 * replacing template variables here: the backend never sees `$var`.
 * Autocompletion lists come from the backend's resources (metrics, labels,
 * label-values), which proxy the server's label API with the datasource's
 * credentials.
 */
export class DataSource extends DataSourceWithBackend<TailrootQuery, TailrootOptions> {
  constructor(instanceSettings: DataSourceInstanceSettings<TailrootOptions>) {
    super(instanceSettings);
  }

  getDefaultQuery(): Partial<TailrootQuery> {
    return DEFAULT_QUERY;
  }

  applyTemplateVariables(query: TailrootQuery, scopedVars: ScopedVars): TailrootQuery {
    return interpolateQuery(query, getTemplateSrv(), scopedVars);
  }

  /** A query runs when it has what its type needs; others are skipped quietly. */
  filterQuery(query: TailrootQuery): boolean {
    if (query.hide) {
      return false;
    }
    switch (query.queryType ?? 'promql') {
      case 'promql':
        return !!query.expr?.trim();
      case 'rootcause':
        return !!query.target?.trim();
      case 'causal':
        return !!query.outcome?.trim() && !!query.treatment?.trim();
      case 'ab':
        return !!query.a?.trim() && !!query.b?.trim();
      default:
        return true;
    }
  }

  getMetricNames(match?: string): Promise<string[]> {
    return this.getResource<string[]>('metrics', match ? { 'match[]': match } : undefined);
  }

  getLabelNames(match?: string): Promise<string[]> {
    return this.getResource<string[]>('labels', match ? { 'match[]': match } : undefined);
  }

  getLabelValues(label: string, match?: string): Promise<string[]> {
    const params: Record<string, string> = { label };
    if (match) {
      params['match[]'] = match;
    }
    return this.getResource<string[]>('label-values', params);
  }

  /**
   * Template variable queries, in the Prometheus datasource's syntax:
   * label_names(), label_values(label), label_values(metric_or_selector,
   * label) and metrics(regex).
   */
  async metricFindQuery(query: string, options?: { scopedVars?: ScopedVars }): Promise<MetricFindValue[]> {
    const q = getTemplateSrv().replace(query, options?.scopedVars);
    const parsed = parseVariableQuery(q);
    let values: string[];
    switch (parsed.kind) {
      case 'label_names':
        values = await this.getLabelNames(parsed.match);
        break;
      case 'label_values':
        values = await this.getLabelValues(parsed.label, parsed.match);
        break;
      case 'metrics': {
        const names = await this.getMetricNames();
        const re = new RegExp(parsed.regex);
        values = names.filter((n) => re.test(n));
        break;
      }
    }
    return values.map((text) => ({ text }));
  }
}

export type VariableQuery =
  | { kind: 'label_names'; match?: string }
  | { kind: 'label_values'; label: string; match?: string }
  | { kind: 'metrics'; regex: string };

/** parseVariableQuery reads a template variable query; it throws on anything else. */
export function parseVariableQuery(q: string): VariableQuery {
  const s = q.trim();
  let m = /^label_names\(\s*(.*?)\s*\)$/.exec(s);
  if (m) {
    return { kind: 'label_names', match: m[1] || undefined };
  }
  m = /^label_values\(\s*(?:(.+?)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$/.exec(s);
  if (m) {
    return { kind: 'label_values', label: m[2], match: m[1] || undefined };
  }
  m = /^metrics\(\s*(.*?)\s*\)$/.exec(s);
  if (m) {
    return { kind: 'metrics', regex: m[1] || '.*' };
  }
  throw new Error(
    `variable query "${q}": use label_names(), label_values(label), label_values(selector, label) or metrics(regex)`
  );
}
