import uPlot from 'uplot';
import { value, period } from './util';

// Chart is one series in uPlot: drag to zoom, double-click to reset, the
// legend shows the value under the cursor.
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

  set(times: number[], values: (number | null)[], label: string, freq: string): void {
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue('--muted').trim() || '#888';
    const grid = css.getPropertyValue('--grid').trim() || 'rgba(128,128,128,.15)';
    const line = css.getPropertyValue('--accent').trim() || '#3b82f6';
    const fill = css.getPropertyValue('--accent-soft').trim() || 'rgba(59,130,246,.12)';
    // Generic families only: WebKitGTK asks fontconfig for every family
    // named, and each one missing cost tens of ms at start-up (uPlot's
    // default axis font names eleven).
    const font = '12px system-ui, sans-serif';
    const axis = { font, labelFont: `bold ${font}`, stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const opts: uPlot.Options = {
      ...this.size(),
      cursor: { drag: { x: true, y: false }, focus: { prox: 30 } },
      scales: { x: { time: true } },
      legend: { live: true },
      axes: [axis, { ...axis, size: 70, values: (_u, ticks) => ticks.map((t) => value(t)) }],
      series: [
        { label: 'Period', value: (_u, t) => (t == null ? '—' : period(t, freq)) },
        { label, stroke: line, width: 1.6, fill, spanGaps: true, points: { show: times.length < 80 }, value: (_u, v) => value(v) },
      ],
    };
    this.plot?.destroy();
    this.plot = new uPlot(opts, [times, values] as uPlot.AlignedData, this.el);
  }

  clear(): void {
    this.plot?.destroy();
    this.plot = undefined;
  }
}
