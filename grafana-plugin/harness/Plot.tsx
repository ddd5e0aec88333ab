import { DataFrame, Field, FieldType, getFieldDisplayName } from '@grafana/data';

const COLORS = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9', '#fade2a'];

interface Series {
  name: string;
  points: Array<[number, number]>;
}

/** seriesOf extracts (time, value) series from time-series frames. */
export function seriesOf(frames: DataFrame[]): Series[] {
  const out: Series[] = [];
  for (const frame of frames) {
    const time = frame.fields.find((f) => f.type === FieldType.time);
    if (!time) {
      continue;
    }
    for (const field of frame.fields) {
      if (field.type !== FieldType.number) {
        continue;
      }
      const points: Array<[number, number]> = [];
      for (let i = 0; i < frame.length; i++) {
        const t = time.values[i] as number;
        const v = (field as Field<number | null>).values[i];
        if (v !== null && v !== undefined && Number.isFinite(v)) {
          points.push([t, v]);
        }
      }
      out.push({ name: getFieldDisplayName(field, frame, frames), points });
    }
  }
  return out;
}

/**
 * Plot draws time series as SVG polylines with a legend: enough to see that
 * the frames the plugin returned carry the right series and values.
 */
export function Plot({ frames, width = 1100, height = 320 }: { frames: DataFrame[]; width?: number; height?: number }) {
  const series = seriesOf(frames);
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) {
    return <div data-testid="plot-empty">No data</div>;
  }
  const pad = { l: 64, r: 12, t: 12, b: 28 };
  const t0 = Math.min(...all.map((p) => p[0]));
  const t1 = Math.max(...all.map((p) => p[0]));
  const v0 = Math.min(0, ...all.map((p) => p[1]));
  const v1 = Math.max(...all.map((p) => p[1])) || 1;
  const x = (t: number) => pad.l + ((t - t0) / Math.max(t1 - t0, 1)) * (width - pad.l - pad.r);
  const y = (v: number) => height - pad.b - ((v - v0) / Math.max(v1 - v0, 1e-12)) * (height - pad.t - pad.b);
  const ticks = [v0, (v0 + v1) / 2, v1];
  return (
    <div data-testid="plot" data-series-count={series.length} data-point-count={all.length}>
      <svg width={width} height={height} role="img" aria-label="query result plot">
        <rect x={0} y={0} width={width} height={height} fill="#111217" />
        {ticks.map((v) => (
          <g key={v}>
            <line x1={pad.l} x2={width - pad.r} y1={y(v)} y2={y(v)} stroke="#2c3235" />
            <text x={pad.l - 6} y={y(v) + 4} fill="#8e8e8e" fontSize={11} textAnchor="end">
              {v.toPrecision(3)}
            </text>
          </g>
        ))}
        <text x={pad.l} y={height - 8} fill="#8e8e8e" fontSize={11}>
          {new Date(t0).toISOString().slice(11, 19)}
        </text>
        <text x={width - pad.r} y={height - 8} fill="#8e8e8e" fontSize={11} textAnchor="end">
          {new Date(t1).toISOString().slice(11, 19)} UTC
        </text>
        {series.map((s, i) => (
          <polyline
            key={s.name + i}
            data-testid="plot-series"
            data-name={s.name}
            data-points={s.points.length}
            fill="none"
            stroke={COLORS[i % COLORS.length]}
            strokeWidth={1.5}
            points={s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ')}
          />
        ))}
      </svg>
      <ul style={{ listStyle: 'none', display: 'flex', gap: 16, padding: 0, margin: '6px 0 0' }}>
        {series.map((s, i) => (
          <li key={s.name + i} data-testid="legend-item" style={{ color: COLORS[i % COLORS.length] }}>
            ▬ {s.name}
          </li>
        ))}
      </ul>
    </div>
  );
}
