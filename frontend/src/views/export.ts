import { api, on, ExportProgress } from '../api';
import type { View } from '../main';
import { exportSelection } from '../state';
import { h, clear, debounce, num, bytes, errorBox, toast } from '../util';

export class ExportView implements View {
  id = 'export';
  title = 'Export';
  icon = 'M19 9h-4V3H9v6H5l7 7 7-7zM5 18v2h14v-2H5z';
  el = h('section');

  private q = h('input', { id: 'export-search', type: 'search', placeholder: 'Add series: type an id or name…', autocomplete: 'off' }) as HTMLInputElement;
  private suggestions = h('div', { class: 'suggestions' });
  private chips = h('div', { id: 'export-series', class: 'chips selected' });
  private from = h('input', { id: 'export-from', placeholder: 'first point', size: 12 }) as HTMLInputElement;
  private to = h('input', { id: 'export-to', placeholder: 'last point', size: 12 }) as HTMLInputElement;
  private per = sel('export-per', [['', 'As stored'], ['D', 'Daily'], ['W', 'Weekly'], ['M', 'Monthly'], ['Q', 'Quarterly'], ['A', 'Annual']]);
  private agg = sel('export-agg', [['', 'Last'], ['first', 'First'], ['avg', 'Average'], ['sum', 'Sum'], ['min', 'Min'], ['max', 'Max']]);
  private fill = sel('export-fill', [['', 'Empty cell'], ['prev', 'Previous value'], ['na', '#N/A']]);
  private values = h('input', { type: 'radio', name: 'mode', id: 'mode-values', checked: true }) as HTMLInputElement;
  private formulas = h('input', { type: 'radio', name: 'mode', id: 'mode-formulas' }) as HTMLInputElement;
  private path = h('input', { id: 'export-path', class: 'grow', placeholder: 'where to save the .xlsx' }) as HTMLInputElement;
  private go = h('button', { class: 'btn primary', id: 'export-go' }, 'Export') as HTMLButtonElement;
  private bar = h('div', { class: 'bar-fill', style: 'width:0%' });
  private progress = h('div', { class: 'bar big', id: 'export-bar', hidden: true }, this.bar);
  private result = h('div', { id: 'export-result' });
  private pathTouched = false;

  constructor() {
    const search = debounce(async (q: string) => {
      clear(this.suggestions);
      if (!q.trim()) return;
      const r = await api.search(q);
      for (const hit of r.hits.slice(0, 8)) {
        this.suggestions.append(h('button', { class: 'suggestion', onclick: () => { exportSelection.add(hit.id); this.q.value = ''; clear(this.suggestions); } },
          h('strong', {}, hit.id), hit.name ? h('span', { class: 'muted' }, ` ${hit.name}`) : null));
      }
    }, 120);
    this.q.addEventListener('input', () => search(this.q.value));
    this.path.addEventListener('input', () => (this.pathTouched = true));
    this.per.addEventListener('change', () => (this.agg.disabled = !this.per.value));
    this.agg.disabled = true;
    this.go.addEventListener('click', () => void this.run());
    exportSelection.onChange(() => {
      this.renderChips();
      if (!this.el.hidden) void this.suggest();
    });
    on<ExportProgress>('export:progress', (p) => {
      if (p && p.total > 0) this.bar.style.width = `${Math.min(100, (100 * p.done) / p.total)}%`;
    });

    this.el.append(
      h('header', { class: 'view-head' }, h('h1', {}, 'Export to Excel'), h('p', { class: 'muted' }, 'A workbook with the data, a chart and a sheet that says where every number came from.')),
      h('div', { class: 'panel' }, h('h3', {}, 'Series'), h('div', { class: 'search-box' }, this.q), this.suggestions, this.chips),
      h('div', { class: 'panel form' },
        h('h3', {}, 'Range and options'),
        h('div', { class: 'controls' },
          h('label', { class: 'field' }, 'From', this.from),
          h('label', { class: 'field' }, 'To', this.to),
          h('label', { class: 'field' }, 'Frequency', this.per),
          h('label', { class: 'field' }, 'Aggregate', this.agg),
          h('label', { class: 'field' }, 'Missing values', this.fill)),
        h('div', { class: 'row gap top-gap' },
          h('label', { class: 'check' }, this.values, 'Values (a table; works without the add-in)'),
          h('label', { class: 'check' }, this.formulas, 'Live formulas (=ES.Get, refreshed by the add-in)'))),
      h('div', { class: 'panel' },
        h('h3', {}, 'Save as'),
        h('div', { class: 'row gap' }, this.path, h('button', { class: 'btn', onclick: () => void this.browse() }, 'Browse…'), this.go),
        this.progress, this.result));
    this.renderChips();
  }

  show(): void {
    void this.suggest();
  }

  hide(): void {}

  private async suggest(): Promise<void> {
    if (this.pathTouched && this.path.value) return;
    const p = await api.exportSuggestion(exportSelection.list());
    if (!this.pathTouched && p.path) this.path.value = p.path;
  }

  private renderChips(): void {
    clear(this.chips);
    const ids = exportSelection.list();
    if (!ids.length) {
      this.chips.append(h('span', { class: 'muted' }, 'No series yet: search above, or use “Add to export” in the Explorer.'));
    }
    for (const id of ids) {
      this.chips.append(h('span', { class: 'chip removable' }, id,
        h('button', { class: 'x', title: `Remove ${id}`, 'aria-label': `Remove ${id}`, onclick: () => exportSelection.remove(id) }, '×')));
    }
  }

  private async browse(): Promise<void> {
    const p = await api.chooseExportFile(this.path.value);
    if (p.error) {
      clear(this.result);
      this.result.append(errorBox(p.error)!);
    } else if (p.path) {
      this.path.value = p.path;
      this.pathTouched = true;
    }
  }

  private async run(): Promise<void> {
    clear(this.result);
    this.bar.style.width = '0%';
    this.progress.hidden = false;
    this.go.disabled = true;
    const r = await api.export({
      series: exportSelection.list(), from: this.from.value, to: this.to.value,
      per: this.per.value, agg: this.per.value ? this.agg.value : '', fill: this.fill.value,
      formulas: this.formulas.checked, path: this.path.value.trim(),
    });
    this.go.disabled = false;
    if (r.error) {
      this.progress.hidden = true;
      this.result.append(errorBox(r.error)!);
      return;
    }
    this.bar.style.width = '100%';
    this.result.append(h('div', { class: 'ok-box' },
      h('strong', {}, 'Saved '), h('code', {}, r.path),
      h('div', { class: 'small muted' }, `${num(r.series)} series × ${num(r.rows)} dates, ${num(r.cells)} values, ${bytes(r.bytes)} in ${(r.millis / 1000).toFixed(2)} s`),
      h('button', { class: 'btn', id: 'export-open-folder', onclick: async () => {
        const o = await api.openFolder(r.path);
        if (o.error) toast(o.error);
      } }, 'Show in folder')));
  }
}

function sel(id: string, options: [string, string][]): HTMLSelectElement {
  return h('select', { id }, ...options.map(([v, label]) => h('option', { value: v }, label)));
}
