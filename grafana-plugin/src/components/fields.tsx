import { ChangeEvent } from 'react';
import { InlineField, Input, RadioButtonGroup, Select } from '@grafana/ui';

import { TailrootQuery } from '../types';

/** Props shared by the bound fields: the query, how to change it, and when to run. */
export interface BoundProps {
  query: TailrootQuery;
  onChange: (q: TailrootQuery) => void;
  onRunQuery: () => void;
}

type StringKey = {
  [K in keyof TailrootQuery]-?: TailrootQuery[K] extends string | undefined ? K : never;
}[keyof TailrootQuery];
type NumberKey = {
  [K in keyof TailrootQuery]-?: TailrootQuery[K] extends number | undefined ? K : never;
}[keyof TailrootQuery];

const LABEL_WIDTH = 16;

/** TextField edits one string field; the query runs when the field loses focus. */
export function TextField(
  props: BoundProps & { field: StringKey; label: string; tooltip?: string; placeholder?: string; width?: number }
) {
  const { query, onChange, onRunQuery, field, label, tooltip, placeholder, width = 50 } = props;
  return (
    <InlineField label={label} labelWidth={LABEL_WIDTH} tooltip={tooltip}>
      <Input
        data-testid={`tailroot-${field}`}
        aria-label={label}
        width={width}
        value={(query[field] as string | undefined) ?? ''}
        placeholder={placeholder}
        onChange={(e: ChangeEvent<HTMLInputElement>) => onChange({ ...query, [field]: e.currentTarget.value })}
        onBlur={onRunQuery}
      />
    </InlineField>
  );
}

/**
 * NumberField edits one numeric field. An empty box clears the field (the
 * server default applies); text that is not a number is kept out of the
 * query.
 */
export function NumberField(
  props: BoundProps & { field: NumberKey; label: string; tooltip?: string; placeholder?: string; step?: number }
) {
  const { query, onChange, onRunQuery, field, label, tooltip, placeholder, step } = props;
  return (
    <InlineField label={label} labelWidth={LABEL_WIDTH} tooltip={tooltip}>
      <Input
        data-testid={`tailroot-${field}`}
        aria-label={label}
        type="number"
        width={14}
        step={step}
        value={query[field] ?? ''}
        placeholder={placeholder}
        onChange={(e: ChangeEvent<HTMLInputElement>) => {
          const raw = e.currentTarget.value;
          const n = Number(raw);
          if (raw === '') {
            onChange({ ...query, [field]: undefined });
          } else if (Number.isFinite(n)) {
            onChange({ ...query, [field]: n });
          }
        }}
        onBlur={onRunQuery}
      />
    </InlineField>
  );
}

/** ChoiceField picks one of a few values and runs the query at once. */
export function ChoiceField(
  props: BoundProps & {
    field: StringKey;
    label: string;
    options: Array<{ label: string; value: string; description?: string }>;
    tooltip?: string;
    select?: boolean;
  }
) {
  const { query, onChange, onRunQuery, field, label, options, tooltip, select } = props;
  const set = (v?: string) => {
    onChange({ ...query, [field]: v });
    onRunQuery();
  };
  return (
    <InlineField label={label} labelWidth={LABEL_WIDTH} tooltip={tooltip}>
      {select ? (
        <Select
          aria-label={label}
          width={24}
          options={options}
          value={(query[field] as string | undefined) ?? null}
          onChange={(v) => set(v?.value)}
        />
      ) : (
        <RadioButtonGroup
          options={options}
          value={query[field] as string | undefined}
          onChange={(v) => set(v)}
          size="sm"
        />
      )}
    </InlineField>
  );
}
