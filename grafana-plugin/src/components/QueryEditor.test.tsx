import { act, fireEvent, render, screen, waitFor } from '@testing-library/react';

import type { DataSource } from '../datasource';
import { TailrootQuery } from '../types';
import { QueryEditor } from './QueryEditor';

function fakeDatasource() {
  return {
    getMetricNames: jest.fn(async () => ['vllm:num_requests_running', 'vllm:kv_cache_usage_perc']),
    getLabelNames: jest.fn(async () => ['__name__', 'instance', 'model_name']),
    getLabelValues: jest.fn(async () => ['gpu-0']),
  } as unknown as DataSource;
}

// setup renders the editor and lets the autocompletion requests settle.
async function setup(query: TailrootQuery) {
  const onChange = jest.fn();
  const onRunQuery = jest.fn();
  const ds = fakeDatasource();
  const utils = render(<QueryEditor query={query} onChange={onChange} onRunQuery={onRunQuery} datasource={ds} />);
  await act(async () => {});
  return { onChange, onRunQuery, ds, ...utils };
}

describe('QueryEditor', () => {
  it('shows the code editor for PromQL and loads autocompletion', async () => {
    const { ds } = await setup({ refId: 'A', queryType: 'promql', expr: 'up' });
    expect(screen.getByTestId('tailroot-promql-editor')).toBeInTheDocument();
    expect(screen.getByLabelText('PromQL or MetricsQL expression')).toHaveValue('up');
    await waitFor(() => expect(ds.getMetricNames).toHaveBeenCalled());
    expect(ds.getLabelNames).toHaveBeenCalled();
  });

  it('edits the expression and runs it on Shift+Enter', async () => {
    const { onChange, onRunQuery } = await setup({ refId: 'A', expr: '' });
    const box = screen.getByLabelText('PromQL or MetricsQL expression');
    fireEvent.change(box, { target: { value: 'sum(vllm:num_requests_running)' } });
    expect(onChange).toHaveBeenLastCalledWith({ refId: 'A', expr: 'sum(vllm:num_requests_running)' });
    expect(onRunQuery).not.toHaveBeenCalled();
    fireEvent.keyDown(box, { key: 'Enter', shiftKey: true });
    expect(onRunQuery).toHaveBeenCalledTimes(1);
  });

  it('switching to breakdown fills that type’s defaults and keeps shared fields', async () => {
    const { onChange, onRunQuery } = await setup({ refId: 'A', queryType: 'promql', expr: 'up', quantile: 0.9 });
    fireEvent.click(screen.getByLabelText('Breakdown'));
    const next = onChange.mock.calls[0][0] as TailrootQuery;
    expect(next).toMatchObject({ queryType: 'breakdown', metric: 'e2e', method: 'auto', view: 'stages', expr: 'up' });
    // A quantile the user set is kept.
    expect(next.quantile).toBe(0.9);
    expect(onRunQuery).toHaveBeenCalled();
  });

  it('resets view when the type changes meaning', async () => {
    const { onChange } = await setup({ refId: 'A', queryType: 'breakdown', view: 'heat' });
    fireEvent.click(screen.getByLabelText('Root cause'));
    expect((onChange.mock.calls[0][0] as TailrootQuery).view).toBe('ranking');
  });

  it.each([
    ['breakdown', 'tailroot-breakdown-editor'],
    ['rootcause', 'tailroot-rootcause-editor'],
    ['causal', 'tailroot-causal-editor'],
    ['ab', 'tailroot-ab-editor'],
  ] as const)('renders the %s builder', async (queryType, testId) => {
    await setup({ refId: 'A', queryType });
    expect(screen.getByTestId(testId)).toBeInTheDocument();
    expect(screen.queryByTestId('tailroot-promql-editor')).not.toBeInTheDocument();
  });

  it('shows the Shapley baseline only for the Shapley method', async () => {
    const { rerender, onChange, onRunQuery, ds } = await setup({ refId: 'A', queryType: 'breakdown', method: 'auto' });
    expect(screen.queryByLabelText('Baseline offset')).not.toBeInTheDocument();
    rerender(
      <QueryEditor
        query={{ refId: 'A', queryType: 'breakdown', method: 'shapley' }}
        onChange={onChange}
        onRunQuery={onRunQuery}
        datasource={ds}
      />
    );
    expect(screen.getByLabelText('Baseline offset')).toBeInTheDocument();
  });

  it('number fields store numbers and clear to undefined', async () => {
    const { onChange } = await setup({ refId: 'A', queryType: 'ab', a: 'x', b: 'y', quantile: 0.99 });
    const box = screen.getByTestId('tailroot-quantile');
    fireEvent.change(box, { target: { value: '0.95' } });
    expect(onChange).toHaveBeenLastCalledWith(expect.objectContaining({ quantile: 0.95 }));
    fireEvent.change(box, { target: { value: '' } });
    expect(onChange).toHaveBeenLastCalledWith(expect.objectContaining({ quantile: undefined }));
  });

  it('causal confounders are one expression per line, blanks dropped on blur', async () => {
    const { onChange, onRunQuery } = await setup({ refId: 'A', queryType: 'causal', confounders: ['a', ' ', 'b '] });
    const box = screen.getByLabelText('Confounders');
    expect(box).toHaveValue('a\n \nb ');
    fireEvent.blur(box);
    expect(onChange).toHaveBeenLastCalledWith(expect.objectContaining({ confounders: ['a', 'b'] }));
    expect(onRunQuery).toHaveBeenCalled();
  });
});
