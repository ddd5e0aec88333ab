import { QueryEditorProps } from '@grafana/data';
import { InlineField, RadioButtonGroup } from '@grafana/ui';

import type { DataSource } from '../datasource';
import { QUERY_TYPES, QueryType, TailrootOptions, TailrootQuery, TYPE_DEFAULTS } from '../types';
import { ABEditor, BreakdownEditor, CausalEditor, RootCauseEditor } from './BuilderEditors';
import { PromQLEditor } from './PromQLEditor';

export type Props = QueryEditorProps<DataSource, TailrootQuery, TailrootOptions>;

/**
 * QueryEditor switches between code mode (PromQL/MetricsQL) and the
 * attribution builders. Switching type keeps fields the types share and
 * fills the new type's defaults where the query has none.
 */
export function QueryEditor({ query, onChange, onRunQuery, datasource }: Props) {
  const type: QueryType = query.queryType ?? 'promql';
  const bound = { query, onChange, onRunQuery };
  const setType = (t: QueryType) => {
    const next: TailrootQuery = { ...query, queryType: t };
    for (const [k, v] of Object.entries(TYPE_DEFAULTS[t])) {
      const key = k as keyof TailrootQuery;
      // view and method mean different things per type: reset them.
      if (next[key] === undefined || key === 'view' || key === 'method') {
        (next as unknown as Record<string, unknown>)[key] = v;
      }
    }
    onChange(next);
    onRunQuery();
  };
  return (
    <div data-testid="tailroot-query-editor">
      <InlineField label="Query type" labelWidth={16}>
        <RadioButtonGroup
          options={QUERY_TYPES.map(({ value, label, description }) => ({ value, label, description }))}
          value={type}
          onChange={setType}
        />
      </InlineField>
      {type === 'promql' && <PromQLEditor {...bound} completer={datasource} />}
      {type === 'breakdown' && <BreakdownEditor {...bound} />}
      {type === 'rootcause' && <RootCauseEditor {...bound} />}
      {type === 'causal' && <CausalEditor {...bound} />}
      {type === 'ab' && <ABEditor {...bound} />}
    </div>
  );
}
