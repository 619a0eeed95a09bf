import { api, copyText, Info, Opened, SearchResult, Series } from '../api';
import type { Shell, View } from '../main';
import { reportReady } from '../main';
import { Chart } from '../chart';
import { exportSelection } from '../state';
import { h, clear, debounce, num, value, period, freqNames, errorBox, toast } from '../util';

const TABLE_PAGE = 500;

export class ExplorerView implements View {
  id = 'explorer';
  title = 'Explorer';
  icon = 'M3.5 18.49l6-6.01 4 4L22 6.92l-1.41-1.41-7.09 7.97-4-4L2 16.99z';
  el = h('section', { class: 'explorer' });

  private q = h('input', { id: 'search', type: 'search', placeholder: 'Search series by id or name…', autocomplete: 'off', spellcheck: 'false' }) as HTMLInputElement;
  private results = h('div', { id: 'results', class: 'results', role: 'listbox' });
  private resultInfo = h('div', { class: 'small muted result-info' });
  private head = h('div', { class: 'series-head' });
  private from = h('input', { id: 'from', placeholder: 'first', title: 'From: 2020, 2020-03, 2020-03-15, -1Y, …', size: 11 }) as HTMLInputElement;
  private to = h('input', { id: 'to', placeholder: 'last', title: 'To (inclusive): 2024, 2024-06, today, …', size: 11 }) as HTMLInputElement;
  private per = select('per', [['', 'As stored'], ['D', 'Daily'], ['W', 'Weekly'], ['M', 'Monthly'], ['Q', 'Quarterly'], ['A', 'Annual']]);
  private agg = select('agg', [['last', 'Last'], ['first', 'First'], ['avg', 'Average'], ['sum', 'Sum'], ['min', 'Min'], ['max', 'Max']]);
  private formula = h('code', { id: 'formula', class: 'formula' });
  private chartBox = h('div', { id: 'chart', class: 'chart' });
  private table = h('div', { id: 'table', class: 'table-box' });
  private msg = h('div');
  private chart = new Chart(this.chartBox);
  private current?: Info;
  private data?: Series;
  private shown = 0;
  private seq = 0; // of the latest search, to drop stale answers
  private loadSeq = 0;

  constructor(private shell: Shell) {
    const search = debounce((q: string) => void this.search(q), 120);
    this.q.addEventListener('input', () => search(this.q.value));
    this.q.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        const first = this.results.querySelector<HTMLButtonElement>('.hit');
        first?.click();
      }
    });
    const reload = debounce(() => void this.load(), 250);
    for (const i of [this.from, this.to]) i.addEventListener('input', reload);
    this.per.addEventListener('change', () => {
      this.agg.disabled = !this.per.value;
      void this.load();
    });
    this.agg.addEventListener('change', () => void this.load());
    this.agg.disabled = true;

    const presets = h('div', { class: 'seg', role: 'group', 'aria-label': 'Range' },
      ...([['All', 0], ['10Y', 10], ['5Y', 5], ['1Y', 1]] as [string, number][]).map(([label, years]) =>
        h('button', { class: 'seg-btn', onclick: () => this.preset(years) }, label)));

    const side = h('div', { class: 'explorer-side' }, h('div', { class: 'search-box' }, this.q), this.resultInfo, this.results);
    const controls = h('div', { class: 'controls' },
      presets,
      h('label', { class: 'field' }, 'From', this.from),
      h('label', { class: 'field' }, 'To', this.to),
      h('label', { class: 'field' }, 'Frequency', this.per),
      h('label', { class: 'field' }, 'Aggregate', this.agg),
      h('span', { class: 'grow' }),
      h('button', { class: 'btn', id: 'add-export', onclick: () => this.addToExport() }, 'Add to export'),
      h('button', { class: 'btn primary', id: 'copy-formula', onclick: () => void this.copyFormula() }, 'Copy formula'));
    const main = h('div', { class: 'explorer-main' },
      this.head, controls,
      h('div', { class: 'formula-row' }, h('span', { class: 'small muted' }, 'Excel'), this.formula),
      this.msg, this.chartBox, this.table);
    this.el.append(side, main);
    this.empty();
  }

  show(): void {
    setTimeout(() => this.q.focus(), 0);
  }

  hide(): void {}

  private empty(): void {
    clear(this.head);
    this.head.append(h('div', { class: 'placeholder' }, h('h2', {}, 'Find a series'), h('p', { class: 'muted' }, 'Type an id or part of a name on the left: every dataset is searched as you type.')));
  }

  async search(q: string): Promise<void> {
    const my = ++this.seq;
    const r: SearchResult = await api.search(q);
    if (my !== this.seq) return;
    clear(this.results);
    clear(this.resultInfo);
    if (r.error) {
      this.results.append(errorBox(r.error)!);
      return;
    }
    if (!q.trim()) return;
    this.resultInfo.append(r.hits.length === 0 ? 'No series match.' : `${r.hits.length}${r.more ? '+' : ''} series · ${(r.micros / 1000).toFixed(1)} ms`);
    for (const hit of r.hits) {
      const b = h('button', { class: 'hit', role: 'option', 'data-id': hit.id, onclick: () => this.open(`${hit.dataset}:${hit.id}`) },
        h('div', { class: 'hit-id' }, hit.id),
        hit.name ? h('div', { class: 'hit-name' }, hit.name) : null,
        h('div', { class: 'hit-meta' }, [hit.dataset, hit.unit, freqNames[hit.frequency] ?? hit.frequency].filter(Boolean).join(' · ')));
      if (this.current && this.current.id === hit.id && this.current.dataset === hit.dataset) b.classList.add('active');
      this.results.append(b);
    }
  }

  // open shows series ref ("id" or "dataset:id"); pre is its data when
  // Hello brought it (start-up), so that the chart shows without a call.
  async open(ref: string, pre?: Opened): Promise<void> {
    const info = pre?.info ?? (await api.info(ref));
    clear(this.msg);
    if (info.error) {
      this.msg.append(errorBox(info.error)!);
      return;
    }
    this.current = info;
    if (!this.q.value.trim()) {
      this.q.value = info.id;
      // At start-up the list of matches can wait for the chart.
      if (pre) setTimeout(() => void this.search(info.id), 50);
      else void this.search(info.id);
    }
    for (const b of this.results.querySelectorAll('.hit')) b.classList.toggle('active', (b as HTMLElement).dataset.id === info.id);
    this.from.value = '';
    this.to.value = '';
    this.renderHead(info);
    await this.load(pre);
  }

  private ref(): string {
    return this.current ? `${this.current.dataset}:${this.current.id}` : '';
  }

  private renderHead(i: Info): void {
    clear(this.head);
    const chip = (k: string, v: string) => h('span', { class: 'chip' }, h('span', { class: 'muted' }, k), ' ', v);
    this.head.append(
      h('div', { class: 'row gap' }, h('h2', { id: 'series-title' }, i.name || i.id), i.pending ? h('span', { class: 'badge warn' }, 'updated') : null),
      h('div', { class: 'chips' },
        chip('id', i.id), chip('dataset', i.dataset), i.unit ? chip('unit', i.unit) : null,
        chip('frequency', i.frequencyName || i.frequency), chip('points', num(i.count)),
        i.count ? chip('range', `${period(i.first, i.frequency)} – ${period(i.last, i.frequency)}`) : null,
        chip('latest', value(i.latest)), i.source ? chip('source', i.source) : null));
  }

  private preset(years: number): void {
    if (!this.current) return;
    if (!years) {
      this.from.value = '';
      this.to.value = '';
    } else {
      const d = new Date(this.current.last * 1000);
      d.setUTCFullYear(d.getUTCFullYear() - years);
      this.from.value = d.toISOString().slice(0, 10);
      this.to.value = '';
    }
    void this.load();
  }

  // load fetches and shows the current series' points and formula; pre
  // is what Hello brought for the default range and frequency.
  async load(pre?: Opened): Promise<void> {
    if (!this.current) return;
    const my = ++this.loadSeq;
    const ref = this.ref();
    const per = this.per.value;
    const agg = per ? this.agg.value : '';
    const [s, f] = pre && !per && !this.from.value && !this.to.value
      ? [pre.series, pre.formula]
      : await Promise.all([
        api.series(ref, this.from.value, this.to.value, per, agg),
        api.formula(this.current.id, this.from.value, this.to.value, { per, agg, fill: '', desc: false, headers: false, last: 0 }),
      ]);
    if (my !== this.loadSeq) return;
    clear(this.msg);
    this.formula.textContent = f.error ? '' : f.text;
    this.formula.title = f.error ? f.error : `Spills to ${num(f.rows)} rows × ${f.cols} columns`;
    if (s.error) {
      this.msg.append(errorBox(s.error)!);
      this.chart.clear();
      clear(this.table);
      return;
    }
    if (s.note) this.msg.append(h('div', { class: 'note' }, s.note));
    this.data = s;
    this.chart.set(s.times, s.values, s.unit ? `${s.id} (${s.unit})` : s.id, s.frequency);
    this.shown = 0;
    clear(this.table);
    this.renderTable();
    reportReady('explorer');
  }

  // renderTable shows the points newest first, a page at a time.
  private renderTable(): void {
    const s = this.data;
    if (!s) return;
    let tbody = this.table.querySelector('tbody');
    if (!tbody) {
      tbody = h('tbody');
      this.table.append(h('table', { class: 'grid compact' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Period'), h('th', { class: 'num' }, s.unit ? `Value (${s.unit})` : 'Value'))), tbody));
    }
    const n = s.times.length;
    const end = Math.min(n, this.shown + TABLE_PAGE);
    const frag = document.createDocumentFragment();
    for (let k = this.shown; k < end; k++) {
      const i = n - 1 - k;
      frag.append(h('tr', {}, h('td', {}, period(s.times[i], s.frequency)), h('td', { class: 'num' }, value(s.values[i]))));
    }
    tbody.append(frag);
    this.shown = end;
    this.table.querySelector('.more')?.remove();
    if (end < n) {
      this.table.append(h('button', { class: 'btn ghost more', onclick: () => this.renderTable() }, `Show more (${num(n - end)} older)`));
    }
  }

  private async copyFormula(): Promise<void> {
    const text = this.formula.textContent ?? '';
    if (!text) {
      toast(this.formula.title || 'Choose a series first');
      return;
    }
    toast((await copyText(text)) ? 'Formula copied' : 'Could not copy; select the formula and copy it');
  }

  private addToExport(): void {
    if (!this.current) return;
    exportSelection.add(this.current.id);
    toast(`${this.current.id} added to the export`);
    void this.shell;
  }
}

function select(id: string, options: [string, string][]): HTMLSelectElement {
  return h('select', { id }, ...options.map(([v, label]) => h('option', { value: v }, label)));
}
