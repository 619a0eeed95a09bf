import uPlot from 'uplot';
import { decimalsOf, fixed, localPeriod } from './util';

// A line of the chart: its values align with the chart's times.
export interface Line {
  label: string;
  values: (number | null)[];
  axis: number; // 0 the left axis, 1 the right (a second unit)
  decimals: number; // shown with this many, the same for every value of the line
}

// palette: eight lines told apart in light and dark themes.
const palette = ['#3b82f6', '#f97316', '#10b981', '#e11d48', '#a855f7', '#eab308', '#06b6d4', '#64748b'];

// Chart is one or more series in uPlot: drag to zoom, double-click to
// reset, the legend shows the values under the cursor. A second unit gets
// a right-hand axis of its own.
export class Chart {
  el: HTMLElement;
  private plot?: uPlot;
  private ro: ResizeObserver;

  constructor(el: HTMLElement) {
    this.el = el;
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(el);
  }

  private size(): { width: number; height: number } {
    return { width: Math.max(300, this.el.clientWidth), height: Math.max(220, this.el.clientHeight - 40) };
  }

  private resize(): void {
    this.plot?.setSize(this.size());
  }

  // set shows one series.
  set(times: number[], values: (number | null)[], label: string, freq: string, decimals: number): void {
    this.setMany(times, [{ label, values, axis: 0, decimals }], freq, []);
  }

  // setMany shows several series over the same times; units name the axes
  // (units[0] left, units[1] right).
  setMany(times: number[], lines: Line[], freq: string, units: string[]): void {
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue('--muted').trim() || '#888';
    const grid = css.getPropertyValue('--grid').trim() || 'rgba(128,128,128,.15)';
    const accent = css.getPropertyValue('--accent').trim() || palette[0];
    const fill = css.getPropertyValue('--accent-soft').trim() || 'rgba(59,130,246,.12)';
    // Generic families only: WebKitGTK asks fontconfig for every family
    // named, and each one missing cost tens of ms at start-up (uPlot's
    // default axis font names eleven).
    const font = '12px system-ui, sans-serif';
    const axis = { font, labelFont: `bold ${font}`, stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const single = lines.length === 1;
    const right = lines.some((l) => l.axis === 1);
    // Tick labels: as many decimals as the ticks' step needs, the same on each.
    const ticksText = (ticks: number[]) => ticks.map((t) => fixed(t, Math.min(decimalsOf(ticks), 6)));
    const axes: uPlot.Axis[] = [
      axis,
      { ...axis, scale: 'y', size: 70, label: units[0] || undefined, values: (_u, ticks) => ticksText(ticks) },
    ];
    if (right) {
      axes.push({ ...axis, scale: 'y2', side: 1, size: 70, grid: { show: false }, label: units.slice(1).join(', ') || undefined,
        values: (_u, ticks) => ticksText(ticks) });
    }
    const opts: uPlot.Options = {
      ...this.size(),
      cursor: { drag: { x: true, y: false }, focus: { prox: 30 } },
      scales: { x: { time: true }, y: {}, ...(right ? { y2: {} } : {}) },
      legend: { live: true },
      axes,
      series: [
        { label: 'Period', value: (_u, t) => (t == null ? '—' : localPeriod(t, freq)) },
        ...lines.map((l, i) => ({
          label: l.label,
          scale: l.axis === 1 ? 'y2' : 'y',
          stroke: single ? accent : palette[i % palette.length],
          width: 1.6,
          fill: single ? fill : undefined,
          spanGaps: true,
          points: { show: l.values.filter((v) => v != null).length < 80 },
          value: (_u: uPlot, v: number | null) => fixed(v, l.decimals),
        })),
      ],
    };
    this.plot?.destroy();
    this.plot = new uPlot(opts, [times, ...lines.map((l) => l.values)] as uPlot.AlignedData, this.el);
  }

  clear(): void {
    this.plot?.destroy();
    this.plot = undefined;
  }
}
