import { ScopedVars } from '@grafana/data';
import { TailrootQuery } from './types';

/** The part of Grafana's TemplateSrv this plugin uses. */
export interface Replacer {
  replace(target?: string, scopedVars?: ScopedVars, format?: string | Function): string;
}

/** String fields of a query that may hold template variables. */
export const INTERPOLATED_FIELDS = [
  'expr',
  'legendFormat',
  'step',
  'metric',
  'selector',
  'baseline',
  'target',
  'candidates',
  'changeAt',
  'outcome',
  'treatment',
  'a',
  'b',
] as const;

/**
 * interpolateQuery replaces template variables in every string field (and
 * each confounder). Multi-value variables inside PromQL are rendered as a
 * regex alternation (a|b), as Grafana's Prometheus datasource does, so
 * `instance=~"$instance"` works with "All" and multi-select. legendFormat is
 * left to the backend's {{label}} rendering but its $variables are
 * replaced too.
 */
export function interpolateQuery(query: TailrootQuery, srv: Replacer, scopedVars: ScopedVars = {}): TailrootQuery {
  const out: TailrootQuery = { ...query };
  for (const f of INTERPOLATED_FIELDS) {
    const v = out[f];
    if (typeof v === 'string' && v !== '') {
      out[f] = srv.replace(v, scopedVars, promRegexFormat);
    }
  }
  if (out.confounders) {
    out.confounders = out.confounders.map((c) => srv.replace(c, scopedVars, promRegexFormat));
  }
  return out;
}

/** Escapes regex metacharacters of one value for use inside =~"…". */
export function escapeRegex(v: string): string {
  return v.replace(/[\\^$*+?.()|[\]{}]/g, '\\\\$&');
}

/**
 * promRegexFormat is the variable format for PromQL: one value as is (it
 * may be used with =), several values as an escaped alternation.
 */
export function promRegexFormat(value: string | string[]): string {
  if (typeof value === 'string') {
    return value;
  }
  if (value.length === 1) {
    return value[0];
  }
  return '(' + value.map(escapeRegex).join('|') + ')';
}
