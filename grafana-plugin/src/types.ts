import { DataQuery, DataSourceJsonData } from '@grafana/schema';

/** Query types; each maps to one backend handler (see CONTRACT.md). */
export type QueryType = 'promql' | 'breakdown' | 'rootcause' | 'causal' | 'ab';

export const QUERY_TYPES: Array<{ value: QueryType; label: string; description: string }> = [
  { value: 'promql', label: 'PromQL / MetricsQL', description: 'Code mode: any PromQL or MetricsQL expression' },
  { value: 'breakdown', label: 'Breakdown', description: 'P99 latency split into stages that add up' },
  { value: 'rootcause', label: 'Root cause', description: 'Rank kernel, GPU and serving causes of a change' },
  { value: 'causal', label: 'Causal effect', description: 'Effect of one series on another, with a CI' },
  { value: 'ab', label: 'A/B', description: 'Quantile difference between two label sets, with a CI' },
];

/**
 * TailrootQuery mirrors the backend's Query (pkg/plugin/query.go). Fields a
 * query type does not use are ignored by the backend.
 */
export interface TailrootQuery extends DataQuery {
  queryType?: QueryType;
  // promql
  expr?: string;
  instant?: boolean;
  range?: boolean;
  format?: 'time_series' | 'table' | 'heatmap';
  legendFormat?: string;
  step?: string;
  // attribution
  metric?: string;
  selector?: string;
  quantile?: number;
  method?: string;
  view?: string;
  baseline?: string;
  target?: string;
  candidates?: string;
  changeAt?: string;
  alpha?: number;
  maxLag?: number;
  outcome?: string;
  treatment?: string;
  confounders?: string[];
  level?: number;
  a?: string;
  b?: string;
  ciMethod?: string;
}

export const DEFAULT_QUERY: Partial<TailrootQuery> = {
  queryType: 'promql',
  expr: '',
  range: true,
  instant: false,
  format: 'time_series',
};

/** Defaults per attribution type, applied when the user switches type. */
export const TYPE_DEFAULTS: Record<QueryType, Partial<TailrootQuery>> = {
  promql: { range: true, format: 'time_series' },
  breakdown: { metric: 'e2e', quantile: 0.99, method: 'auto', view: 'stages' },
  rootcause: { view: 'ranking', alpha: 0.05 },
  causal: { method: 'backdoor', level: 0.95 },
  ab: { metric: 'e2e', quantile: 0.99, level: 0.95, ciMethod: 'order_statistic' },
};

/**
 * Datasource settings. URL, basic auth and custom headers use Grafana's
 * standard HTTP settings (basicAuthUser, jsonData.httpHeaderNameN,
 * secureJsonData.basicAuthPassword / httpHeaderValueN), which the backend's
 * SDK HTTP client reads.
 */
export interface TailrootOptions extends DataSourceJsonData {
  timeout?: number;
  [key: `httpHeaderName${number}`]: string;
}

export interface TailrootSecureJsonData {
  basicAuthPassword?: string;
  [key: `httpHeaderValue${number}`]: string;
}
