import { DataFrame, Field, FieldType } from '@grafana/data';

import { Plot } from './Plot';

const COLORS = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9', '#fade2a', '#96d98d'];

/**
 * Panel draws the frames the plugin returned the way the panel Grafana
 * would pick for them does, in miniature: the breakdown's wide frame as one
 * stacked bar (Bar chart), the root-cause ranking as a table (Table), the
 * nodes/edges pair as a graph (Node Graph), anything else as time series.
 * The harness has no Grafana server, so these stand in for Grafana's panels;
 * the frames they draw are the plugin's own.
 */
export function Panel({ frames }: { frames: DataFrame[] }) {
  const nodes = frames.find((f) => f.name === 'nodes');
  const edges = frames.find((f) => f.name === 'edges');
  if (nodes && edges) {
    return <GraphPanel nodes={nodes} edges={edges} />;
  }
  const bar = frames.find((f) => f.fields[0]?.name === 'quantity');
  if (bar) {
    return <BarPanel frame={bar} />;
  }
  const table = frames.find((f) => f.meta?.preferredVisualisationType === 'table' || f.name === 'rootcause');
  if (table) {
    return <TablePanel frame={table} />;
  }
  return <Plot frames={frames} />;
}

function num(f: Field | undefined, i: number): number | undefined {
  const v = f?.values[i];
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function notices(frame: DataFrame): string {
  return (frame.meta?.notices ?? []).map((n) => n.text).join('; ');
}

/** BarPanel stacks a wide breakdown frame's stage columns into one bar. */
function BarPanel({ frame, width = 1100 }: { frame: DataFrame; width?: number }) {
  const stages = frame.fields.filter((f) => f.type === FieldType.number);
  const values = stages.map((f) => Math.max(num(f, 0) ?? 0, 0));
  const total = values.reduce((a, b) => a + b, 0);
  const label = String(frame.fields[0].values[0] ?? '');
  const pad = 8;
  let x = pad;
  return (
    <div data-testid="bar-panel" data-stages={stages.length} data-total={total}>
      <div style={{ marginBottom: 6 }}>
        {label} — {total.toFixed(2)} s <span style={{ color: '#8e8e8e' }}>{notices(frame)}</span>
      </div>
      <svg width={width} height={70} role="img" aria-label="breakdown stacked bar">
        <rect x={0} y={0} width={width} height={70} fill="#111217" />
        {stages.map((f, i) => {
          const w = total > 0 ? (values[i] / total) * (width - 2 * pad) : 0;
          const r = (
            <g key={f.name} data-testid="bar-segment" data-stage={f.name} data-seconds={values[i]}>
              <rect x={x} y={12} width={w} height={46} fill={COLORS[i % COLORS.length]} />
              {w > 60 && (
                <text x={x + 6} y={40} fill="#111217" fontSize={12}>
                  {f.name} {values[i].toFixed(2)} s
                </text>
              )}
            </g>
          );
          x += w;
          return r;
        })}
      </svg>
      <ul style={{ listStyle: 'none', display: 'flex', flexWrap: 'wrap', gap: 16, padding: 0, margin: '6px 0 0' }}>
        {stages.map((f, i) => (
          <li key={f.name} style={{ color: COLORS[i % COLORS.length] }}>
            ■ {f.name} {values[i].toFixed(3)} s ({total > 0 ? ((100 * values[i]) / total).toFixed(1) : '0'} %)
          </li>
        ))}
      </ul>
    </div>
  );
}

/** TablePanel shows a table frame, numbers to four significant digits. */
function TablePanel({ frame, rows = 12 }: { frame: DataFrame; rows?: number }) {
  const n = Math.min(frame.length, rows);
  const cell = (f: Field, i: number) => {
    const v = f.values[i];
    if (typeof v === 'number') {
      return Number.isFinite(v) ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : '';
    }
    return v === null || v === undefined ? '' : String(v);
  };
  return (
    <div data-testid="table-panel" data-rows={frame.length}>
      <div style={{ marginBottom: 6, color: '#8e8e8e' }}>{notices(frame)}</div>
      <table style={{ borderCollapse: 'collapse', width: '100%', fontSize: 13 }}>
        <thead>
          <tr>
            {frame.fields.map((f) => (
              <th key={f.name} style={{ textAlign: 'left', borderBottom: '1px solid #2c3235', padding: '4px 8px' }}>
                {f.name}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {Array.from({ length: n }, (_, i) => (
            <tr key={i} data-testid="table-row">
              {frame.fields.map((f) => (
                <td key={f.name} style={{ borderBottom: '1px solid #22252b', padding: '4px 8px' }}>
                  {cell(f, i)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

// Columns of the graph, causes on the left and the symptom on the right.
const KIND_COLUMN: Record<string, number> = { gpu: 0, kernel: 1, serving: 2, stage: 3, target: 4 };

/** GraphPanel lays the nodes out in columns by kind and draws the edges, darker and thicker by weight (|r|). */
function GraphPanel({ nodes, edges, width = 1100 }: { nodes: DataFrame; edges: DataFrame; width?: number }) {
  const field = (f: DataFrame, name: string) => f.fields.find((x) => x.name === name);
  const ids = (field(nodes, 'id')?.values ?? []) as string[];
  const titles = field(nodes, 'title');
  const kinds = field(nodes, 'subtitle');
  const score = field(nodes, 'mainstat');
  const cols = Object.keys(KIND_COLUMN).length;
  const byCol: string[][] = Array.from({ length: cols }, () => []);
  ids.forEach((id, i) => byCol[KIND_COLUMN[String(kinds?.values[i])] ?? 2].push(id));
  const height = Math.max(360, 40 + 78 * Math.max(...byCol.map((c) => c.length)));
  const pos = new Map<string, [number, number]>();
  byCol.forEach((col, c) => {
    col.forEach((id, j) => {
      pos.set(id, [80 + (c * (width - 160)) / (cols - 1), 40 + ((j + 0.5) * (height - 60)) / Math.max(col.length, 1)]);
    });
  });
  const src = field(edges, 'source');
  const dst = field(edges, 'target');
  const weight = field(edges, 'mainstat');
  return (
    <div data-testid="graph-panel" data-nodes={ids.length} data-edges={edges.length}>
      <svg width={width} height={height} role="img" aria-label="serving graph">
        <rect x={0} y={0} width={width} height={height} fill="#111217" />
        {Array.from({ length: edges.length }, (_, i) => {
          const a = pos.get(String(src?.values[i]));
          const b = pos.get(String(dst?.values[i]));
          if (!a || !b) {
            return null;
          }
          const w = num(weight, i) ?? 0;
          return (
            <g key={i} data-testid="graph-edge">
              <line x1={a[0]} y1={a[1]} x2={b[0]} y2={b[1]} stroke="#5794f2" strokeOpacity={0.1 + 0.6 * Math.min(w, 1) ** 2} strokeWidth={0.5 + 2.5 * Math.min(w, 1) ** 2} />
            </g>
          );
        })}
        {ids.map((id, i) => {
          const p = pos.get(id)!;
          const s = num(score, i);
          const kind = String(kinds?.values[i] ?? '');
          return (
            <g key={id} data-testid="graph-node" data-id={id} data-kind={kind}>
              <circle cx={p[0]} cy={p[1]} r={22} fill="#181b1f" stroke={COLORS[(KIND_COLUMN[kind] ?? 5) % COLORS.length]} strokeWidth={3} />
              <text x={p[0]} y={p[1] + 4} fill="#ccccdc" fontSize={11} textAnchor="middle">
                {s === undefined ? '' : s.toPrecision(2)}
              </text>
              <text x={p[0]} y={p[1] + 36} fill="#ccccdc" fontSize={11} textAnchor="middle" stroke="#111217" strokeWidth={3} paintOrder="stroke">
                {String(titles?.values[i] ?? id)}
              </text>
            </g>
          );
        })}
      </svg>
    </div>
  );
}
