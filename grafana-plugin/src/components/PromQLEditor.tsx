import { KeyboardEvent, useEffect, useState } from 'react';
import { InlineField, InlineFieldRow, Select, TextArea } from '@grafana/ui';

import type { DataSource } from '../datasource';
import { BoundProps, ChoiceField, TextField } from './fields';

/** Who supplies autocompletion lists (the DataSource, or a stub in tests). */
export type Completer = Pick<DataSource, 'getMetricNames' | 'getLabelNames' | 'getLabelValues'>;

const FORMATS = [
  { label: 'Time series', value: 'time_series' },
  { label: 'Table', value: 'table' },
  { label: 'Heatmap', value: 'heatmap', description: 'cumulative le buckets to heatmap rows' },
];

const RUN_AS = [
  { label: 'Range', value: 'range' },
  { label: 'Instant', value: 'instant' },
  { label: 'Both', value: 'both' },
];

/**
 * PromQLEditor is the code mode: a free-text PromQL or MetricsQL
 * expression (Shift+Enter runs it), with metric and label pickers that
 * insert at the end of the expression, and the usual options.
 */
export function PromQLEditor(props: BoundProps & { completer: Completer }) {
  const { query, onChange, onRunQuery, completer } = props;
  const [metrics, setMetrics] = useState<string[]>([]);
  const [labels, setLabels] = useState<string[]>([]);
  const [label, setLabel] = useState<string | undefined>();
  const [values, setValues] = useState<string[]>([]);
  const [loadError, setLoadError] = useState<string | undefined>();

  useEffect(() => {
    let live = true;
    Promise.all([completer.getMetricNames(), completer.getLabelNames()])
      .then(([m, l]) => {
        if (live) {
          setMetrics(m);
          setLabels(l.filter((n) => n !== '__name__'));
        }
      })
      .catch((e: unknown) => live && setLoadError(String((e as { message?: string })?.message ?? e)));
    return () => {
      live = false;
    };
  }, [completer]);

  useEffect(() => {
    if (!label) {
      return;
    }
    let live = true;
    completer
      .getLabelValues(label)
      .then((v) => live && setValues(v))
      .catch(() => live && setValues([]));
    return () => {
      live = false;
    };
  }, [completer, label]);

  const expr = query.expr ?? '';
  const append = (text: string) => onChange({ ...query, expr: expr ? `${expr}${text}` : text });
  const runAs = query.instant && query.range ? 'both' : query.instant ? 'instant' : 'range';

  return (
    <div data-testid="tailroot-promql-editor">
      <TextArea
        data-testid="tailroot-expr"
        aria-label="PromQL or MetricsQL expression"
        className="tailroot-code"
        style={{ fontFamily: 'monospace' }}
        rows={3}
        value={expr}
        placeholder="histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[$__rate_interval])))"
        onChange={(e) => onChange({ ...query, expr: e.currentTarget.value })}
        onBlur={onRunQuery}
        onKeyDown={(e: KeyboardEvent<HTMLTextAreaElement>) => {
          if (e.key === 'Enter' && e.shiftKey) {
            e.preventDefault();
            onRunQuery();
          }
        }}
      />
      <InlineFieldRow>
        <InlineField label="Metric" labelWidth={16} tooltip="Insert a metric name" error={loadError} invalid={!!loadError}>
          <Select
            aria-label="Metric"
            width={44}
            placeholder={loadError ? 'cannot load metrics' : 'metric name'}
            options={metrics.map((m) => ({ label: m, value: m }))}
            value={null}
            onChange={(v) => v?.value && append(v.value)}
          />
        </InlineField>
        <InlineField label="Label" tooltip="Insert a label matcher">
          <Select
            aria-label="Label"
            width={20}
            options={labels.map((l) => ({ label: l, value: l }))}
            value={label ?? null}
            onChange={(v) => setLabel(v?.value)}
          />
        </InlineField>
        <InlineField label="=">
          <Select
            aria-label="Label value"
            width={36}
            disabled={!label}
            options={values.map((v) => ({ label: v, value: v }))}
            value={null}
            onChange={(v) => v?.value !== undefined && append(`{${label}="${v.value}"}`)}
          />
        </InlineField>
      </InlineFieldRow>
      <InlineFieldRow>
        <TextField {...props} field="legendFormat" label="Legend" placeholder="{{model_name}}" width={24} />
        <TextField {...props} field="step" label="Min step" placeholder="15s" width={10} />
        <ChoiceField {...props} field="format" label="Format" options={FORMATS} select />
        <InlineField label="Type">
          <ChoiceRunAs
            value={runAs}
            onChange={(v) => {
              onChange({ ...query, range: v !== 'instant', instant: v !== 'range' });
              onRunQuery();
            }}
          />
        </InlineField>
      </InlineFieldRow>
    </div>
  );
}

function ChoiceRunAs({ value, onChange }: { value: string; onChange: (v: string) => void }) {
  return (
    <Select aria-label="Run as" width={14} options={RUN_AS} value={value} onChange={(v) => v?.value && onChange(v.value)} />
  );
}
