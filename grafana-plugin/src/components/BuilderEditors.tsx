import { InlineField, InlineFieldRow, TextArea } from '@grafana/ui';

import { BoundProps, ChoiceField, NumberField, TextField } from './fields';

const LATENCY_METRICS = [
  { label: 'End-to-end', value: 'e2e' },
  { label: 'TTFT', value: 'ttft' },
];

/** BreakdownEditor builds a P99 stage breakdown (stacked bars, heat table or token heatmap). */
export function BreakdownEditor(props: BoundProps) {
  return (
    <div data-testid="tailroot-breakdown-editor">
      <InlineFieldRow>
        <ChoiceField {...props} field="metric" label="Latency" options={LATENCY_METRICS} />
        <NumberField {...props} field="quantile" label="Quantile" placeholder="0.99" step={0.01} />
        <ChoiceField
          {...props}
          field="method"
          label="Method"
          select
          tooltip="auto picks the best source the server has: request records, then tail accumulators, then histograms"
          options={[
            { label: 'auto', value: 'auto' },
            { label: 'tail mean', value: 'tail_mean', description: 'E[stage | S ≥ P99]: adds up exactly' },
            { label: 'Euler', value: 'euler', description: 'requests ranked near the P99' },
            { label: 'excess', value: 'excess', description: 'growth in the tail over typical' },
            { label: 'Shapley', value: 'shapley', description: 'P99 change against a baseline window' },
          ]}
        />
      </InlineFieldRow>
      <InlineFieldRow>
        <TextField {...props} field="selector" label="Selector" placeholder='{model_name="$model"}' />
        <ChoiceField
          {...props}
          field="view"
          label="View"
          options={[
            { label: 'Stages', value: 'stages' },
            { label: 'Heat table', value: 'heat' },
            { label: 'Token heatmap', value: 'tokens' },
          ]}
        />
        {props.query.method === 'shapley' && (
          <TextField {...props} field="baseline" label="Baseline offset" placeholder="1d" width={10} />
        )}
      </InlineFieldRow>
    </div>
  );
}

/** RootCauseEditor ranks candidate causes of a change in a target series. */
export function RootCauseEditor(props: BoundProps) {
  return (
    <div data-testid="tailroot-rootcause-editor">
      <TextField
        {...props}
        field="target"
        label="Target"
        width={80}
        placeholder="histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))"
      />
      <TextField {...props} field="candidates" label="Candidates" width={80} placeholder="server default: kernel, GPU and serving series" />
      <InlineFieldRow>
        <TextField {...props} field="changeAt" label="Change at" placeholder="detected" width={24} tooltip="Unix seconds or RFC 3339" />
        <NumberField {...props} field="alpha" label="FDR alpha" placeholder="0.05" step={0.01} />
        <NumberField {...props} field="maxLag" label="Max lag (steps)" placeholder="10" />
        <ChoiceField
          {...props}
          field="view"
          label="View"
          options={[
            { label: 'Ranking', value: 'ranking' },
            { label: 'Causal graph', value: 'graph' },
          ]}
        />
      </InlineFieldRow>
    </div>
  );
}

/** CausalEditor estimates a treatment series' effect on an outcome series. */
export function CausalEditor(props: BoundProps) {
  const { query, onChange, onRunQuery } = props;
  return (
    <div data-testid="tailroot-causal-editor">
      <TextField {...props} field="outcome" label="Outcome" width={80} placeholder="P99 TTFT expression" />
      <TextField {...props} field="treatment" label="Treatment" width={80} placeholder="e.g. run-queue delay expression" />
      <InlineField label="Confounders" labelWidth={16} tooltip="One PromQL expression per line">
        <TextArea
          data-testid="tailroot-confounders"
          aria-label="Confounders"
          rows={2}
          cols={80}
          value={(query.confounders ?? []).join('\n')}
          onChange={(e) => onChange({ ...query, confounders: e.currentTarget.value.split('\n') })}
          onBlur={() => {
            onChange({ ...query, confounders: (query.confounders ?? []).map((c) => c.trim()).filter((c) => c !== '') });
            onRunQuery();
          }}
        />
      </InlineField>
      <InlineFieldRow>
        <ChoiceField
          {...props}
          field="method"
          label="Method"
          options={[
            { label: 'Backdoor OLS', value: 'backdoor' },
            { label: 'Granger', value: 'granger' },
            { label: 'Lagged corr.', value: 'ccf' },
          ]}
        />
        <NumberField {...props} field="level" label="CI level" placeholder="0.95" step={0.01} />
        <NumberField {...props} field="maxLag" label="Max lag (steps)" placeholder="10" />
      </InlineFieldRow>
    </div>
  );
}

/** ABEditor compares a latency quantile between two label sets. */
export function ABEditor(props: BoundProps) {
  return (
    <div data-testid="tailroot-ab-editor">
      <TextField {...props} field="a" label="A" placeholder='{instance="gpu-0"}' />
      <TextField {...props} field="b" label="B" placeholder='{instance="gpu-1"}' />
      <InlineFieldRow>
        <ChoiceField {...props} field="metric" label="Latency" options={LATENCY_METRICS} />
        <NumberField {...props} field="quantile" label="Quantile" placeholder="0.99" step={0.01} />
        <NumberField {...props} field="level" label="CI level" placeholder="0.95" step={0.01} />
        <ChoiceField
          {...props}
          field="ciMethod"
          label="CI method"
          options={[
            { label: 'Order statistic', value: 'order_statistic' },
            { label: 'Bootstrap', value: 'bootstrap' },
            { label: 'Maritz–Jarrett', value: 'maritz_jarrett' },
            { label: 'Delta', value: 'delta' },
          ]}
        />
      </InlineFieldRow>
    </div>
  );
}
