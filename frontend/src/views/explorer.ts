import { api, BrowseResult, copyText, Facets, FacetValue, Info, on, Opened, SearchHit, SearchResult, SeriesChanged } from '../api';
import type { Shell, View } from '../main';
import { reportReady } from '../main';
import { Chart } from '../chart';
import { exportSelection } from '../state';
import { h, clear, debounce, num, value, period, localPeriod, fixed, decimalsOf, freqNames, errorBox, toast } from '../util';

const TABLE_PAGE = 500;
// MAX_COMPARE is the most series on one chart (app.MaxCompare).
const MAX_COMPARE = 8;

// Shown is what the chart and table show: one or more series over the
// same times.
interface Shown {
  times: number[];
  freq: string;
  cols: { ref: string; id: string; unit: string; values: (number | null)[]; decimals: number; axis: number }[];
  units: string[];
}

// Facet keys of a search hit, beside the search box, and where the
// store's values of each are in Facets.
type FacetKey = 'dataset' | 'source' | 'frequency' | 'unit';
const FACETS: [FacetKey, string, 'datasets' | 'sources' | 'frequencies' | 'units'][] = [['dataset', 'Dataset', 'datasets'], ['source', 'Source', 'sources'], ['frequency', 'Frequency', 'frequencies'], ['unit', 'Unit', 'units']];

export class ExplorerView implements View {
  id = 'explorer';
  title = 'Explorer';
  icon = 'M3.5 18.49l6-6.01 4 4L22 6.92l-1.41-1.41-7.09 7.97-4-4L2 16.99z';
  el = h('section', { class: 'explorer' });

  private q = h('input', { id: 'search', type: 'search', placeholder: 'Search series by id or name…', autocomplete: 'off', spellcheck: 'false' }) as HTMLInputElement;
  private results = h('div', { id: 'results', class: 'results', role: 'listbox' });
  private resultInfo = h('div', { id: 'result-info', class: 'small muted result-info' });
  private head = h('div', { class: 'series-head' });
  private from = h('input', { id: 'from', placeholder: 'first', title: 'From: 2020, 2020-03, 2020-03-15, -1Y, …', size: 11 }) as HTMLInputElement;
  private to = h('input', { id: 'to', placeholder: 'last', title: 'To (inclusive): 2024, 2024-06, today, …', size: 11 }) as HTMLInputElement;
  private per = select('per', [['', 'As stored'], ['D', 'Daily'], ['W', 'Weekly'], ['M', 'Monthly'], ['Q', 'Quarterly'], ['A', 'Annual']]);
  private agg = select('agg', [['last', 'Last'], ['first', 'First'], ['avg', 'Average'], ['sum', 'Sum'], ['min', 'Min'], ['max', 'Max']]);
  private formula = h('code', { id: 'formula', class: 'formula' });
  private chartBox = h('div', { id: 'chart', class: 'chart' });
  private table = h('div', { id: 'table', class: 'table-box' });
  private msg = h('div');
  private compareBox = h('div', { id: 'compare', class: 'chips compare' });
  private facets = h('div', { id: 'facets', class: 'facets' });
  private facetSel: Partial<Record<FacetKey, string>> = {};
  // The store's facet values (ExplorerView.Facets): fetched once the Explorer has
  // been on screen a moment, never for the first view.
  private storeFacets?: Facets;
  private facetsAsked = false;
  private hits: SearchHit[] = [];
  private chart = new Chart(this.chartBox);
  private current?: Info;
  private compared: Info[] = []; // besides current, on the same chart
  private data?: Shown;
  private shown = 0;
  private seq = 0; // of the latest search, to drop stale answers
  private loadSeq = 0;

  constructor(private shell: Shell) {
    const search = debounce((q: string) => void this.search(q), 120);
    this.q.addEventListener('input', () => search(this.q.value));
    this.q.addEventListener('keydown', (e) => {
      const first = this.results.querySelector<HTMLButtonElement>('.hit');
      if (e.key === 'Enter') {
        first?.click();
      } else if (e.key === 'ArrowDown' && first) {
        e.preventDefault();
        first.focus();
      }
    });
    // Arrow keys walk the results, Enter opens one (a button), Escape goes
    // back to the search box.
    this.results.addEventListener('keydown', (e) => {
      const hits = [...this.results.querySelectorAll<HTMLButtonElement>('.hit')];
      const i = hits.indexOf(document.activeElement as HTMLButtonElement);
      if (i < 0) return;
      if (e.key === 'ArrowDown' && i < hits.length - 1) hits[i + 1].focus();
      else if (e.key === 'ArrowUp') (i > 0 ? hits[i - 1] : this.q).focus();
      else if (e.key === 'Home') hits[0].focus();
      else if (e.key === 'End') hits[hits.length - 1].focus();
      else if (e.key === 'Escape') this.q.focus();
      else return;
      e.preventDefault();
    });
    // Follow live values: a delta that touches a series on the chart
    // redraws it (debounced: a burst of deltas is one redraw).
    const follow = debounce(() => void this.load(), 100);
    const refacet = debounce(() => void this.loadFacets(), 1000);
    on<SeriesChanged>('series:changed', (c) => {
      if (this.storeFacets && (!c.ids || c.ids.length === 0)) refacet();
      const shown = [this.current, ...this.compared].filter(Boolean) as Info[];
      if (shown.some((i) => i.dataset === c.dataset && (!c.ids || c.ids.length === 0 || c.ids.includes(i.id)))) follow();
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
        h('button', { class: 'seg-btn', id: `preset-${label}`, onclick: () => this.preset(years) }, label)));

    const side = h('div', { class: 'explorer-side' }, h('div', { class: 'search-box' }, this.q), this.facets, this.resultInfo, this.results);
    const controls = h('div', { class: 'controls' },
      presets,
      h('label', { class: 'field' }, 'From', this.from),
      h('label', { class: 'field' }, 'To', this.to),
      h('label', { class: 'field' }, 'Frequency', this.per),
      h('label', { class: 'field' }, 'Aggregate', this.agg),
      h('span', { class: 'grow' }),
      h('button', { class: 'btn', id: 'add-compare', title: `Draw another series on this chart (up to ${MAX_COMPARE})`, onclick: () => this.addToCompare() }, 'Compare…'),
      h('button', { class: 'btn', id: 'add-export', onclick: () => this.addToExport() }, 'Add to export'),
      h('button', { class: 'btn', id: 'copy-tsv', title: 'Copy the table, tab-separated (pastes into Excel)', onclick: () => void this.copyTable('\t') }, 'Copy TSV'),
      h('button', { class: 'btn', id: 'copy-csv', title: 'Copy the table as CSV', onclick: () => void this.copyTable(',') }, 'Copy CSV'),
      h('button', { class: 'btn primary', id: 'copy-formula', onclick: () => void this.copyFormula() }, 'Copy formula'));
    const main = h('div', { class: 'explorer-main' },
      this.head, controls, this.compareBox,
      h('div', { class: 'formula-row' }, h('span', { class: 'small muted' }, 'Excel'), this.formula),
      this.msg, this.chartBox, this.table);
    this.el.append(side, main);
    this.empty();
  }

  show(): void {
    setTimeout(() => this.q.focus(), 0);
    if (!this.facetsAsked) {
      this.facetsAsked = true;
      setTimeout(() => void this.loadFacets(), 400);
    }
  }

  // loadFacets fetches the store's facet values (computed once per
  // snapshot on the Go side) and offers them beside the search box.
  private async loadFacets(): Promise<void> {
    const f = await api.facets();
    if (f.error) return;
    this.storeFacets = f;
    this.renderFacets();
  }

  hide(): void {}

  private empty(): void {
    clear(this.head);
    this.head.append(h('div', { class: 'placeholder' }, h('h2', {}, 'Find a series'), h('p', { class: 'muted' }, 'Type an id or part of a name on the left: every dataset is searched as you type.')));
  }

  async search(q: string): Promise<void> {
    if (!q.trim()) {
      await this.browse();
      return;
    }
    const my = ++this.seq;
    const r: SearchResult = await api.search(q);
    if (my !== this.seq) return;
    clear(this.results);
    clear(this.resultInfo);
    if (r.error) {
      this.results.append(errorBox(r.error)!);
      return;
    }
    this.hits = r.hits;
    this.renderFacets();
    const hits = r.hits.filter((hit) => FACETS.every(([k]) => !this.facetSel[k] || hit[k] === this.facetSel[k]));
    this.resultInfo.append(r.hits.length === 0 ? 'No series match.' :
      `${hits.length === r.hits.length ? '' : `${hits.length} of `}${r.hits.length}${r.more ? '+' : ''} series · ${(r.micros / 1000).toFixed(1)} ms`);
    this.renderHits(hits);
  }

  // browse lists the series that have the chosen facet values, without a
  // query (ExplorerView.Browse: the first 200 by id and how many match).
  private async browse(): Promise<void> {
    const my = ++this.seq;
    this.hits = [];
    const sel = this.facetSel;
    if (!FACETS.some(([k]) => sel[k])) {
      clear(this.results);
      clear(this.resultInfo);
      this.renderFacets();
      return;
    }
    const r: BrowseResult = await api.browse({ dataset: sel.dataset ?? '', source: sel.source ?? '', frequency: sel.frequency ?? '', unit: sel.unit ?? '' });
    if (my !== this.seq) return;
    clear(this.results);
    clear(this.resultInfo);
    this.renderFacets();
    if (r.error) {
      this.results.append(errorBox(r.error)!);
      return;
    }
    this.resultInfo.append(r.total === 0 ? 'No series match.' :
      `${num(r.total)} series${r.more ? ` · the first ${num(r.hits.length)} by id` : ''}`);
    this.renderHits(r.hits);
  }

  private renderHits(hits: SearchHit[]): void {
    for (const hit of hits) {
      // A compare-picking click adds the series to the chart instead.
      const b = h('button', { class: 'hit', role: 'option', 'data-id': hit.id, 'data-dataset': hit.dataset,
        onclick: () => (this.picking ? this.pickCompare(`${hit.dataset}:${hit.id}`) : this.open(`${hit.dataset}:${hit.id}`)) },
        h('div', { class: 'hit-id' }, hit.id),
        hit.name ? h('div', { class: 'hit-name' }, hit.name) : null,
        h('div', { class: 'hit-meta' }, [hit.dataset, hit.unit, freqNames[hit.frequency] ?? hit.frequency].filter(Boolean).join(' · ')));
      if (this.current && this.current.id === hit.id && this.current.dataset === hit.dataset) b.classList.add('active');
      this.results.append(b);
    }
  }

  // renderFacets offers a select per facet (dataset, source, frequency,
  // unit): the store's values with their series counts once they are
  // known, else the values among the hits. With a query, choosing one
  // narrows the hits; without, it browses the store.
  private renderFacets(): void {
    clear(this.facets);
    for (const [k, label, fk] of FACETS) {
      const store: FacetValue[] | undefined = this.storeFacets?.[fk];
      const vals: FacetValue[] = store ?? [...new Set(this.hits.map((x) => String(x[k] ?? '')).filter(Boolean))].sort().map((value) => ({ value, count: 0 }));
      if (vals.length < 2 && !this.facetSel[k] && !(store && vals.length === 1)) continue;
      const name = (v: string) => (k === 'frequency' ? freqNames[v] ?? v : v);
      const sel = h('select', { id: `facet-${k}`, 'aria-label': label },
        h('option', { value: '' }, `${label}: all`),
        ...vals.map((v) => h('option', { value: v.value }, v.count ? `${name(v.value)} (${num(v.count)})` : name(v.value)))) as HTMLSelectElement;
      sel.value = this.facetSel[k] ?? '';
      sel.addEventListener('change', () => {
        this.facetSel[k] = sel.value || undefined;
        void this.search(this.q.value);
      });
      this.facets.append(sel);
    }
  }

  private picking = false;

  // addToCompare: the next result chosen joins the chart.
  private addToCompare(): void {
    if (!this.current) {
      toast('Open a series first');
      return;
    }
    if (this.compared.length + 1 >= MAX_COMPARE) {
      toast(`The chart compares at most ${MAX_COMPARE} series`);
      return;
    }
    this.picking = true;
    this.el.classList.add('picking');
    toast('Choose a series to compare');
    this.q.focus();
    this.q.select();
  }

  // pickCompare adds series ref to the chart.
  async pickCompare(ref: string): Promise<void> {
    this.picking = false;
    this.el.classList.remove('picking');
    const info = await api.info(ref);
    if (info.error || !this.current) {
      toast(info.error ?? 'Open a series first');
      return;
    }
    const same = (a: Info) => a.dataset === info.dataset && a.id === info.id;
    if (same(this.current) || this.compared.some(same)) return;
    if (this.compared.length + 1 >= MAX_COMPARE) return;
    this.compared.push(info);
    this.renderCompare();
    await this.load();
  }

  private renderCompare(): void {
    clear(this.compareBox);
    if (!this.compared.length) return;
    this.compareBox.append(h('span', { class: 'small muted' }, 'Compared with'));
    for (const c of this.compared) {
      this.compareBox.append(h('span', { class: 'chip', 'data-ref': `${c.dataset}:${c.id}` }, `${c.id}${c.unit ? ` (${c.unit})` : ''}`,
        h('button', { class: 'chip-x', title: `Remove ${c.id}`, onclick: () => {
          this.compared = this.compared.filter((x) => x !== c);
          this.renderCompare();
          void this.load();
        } }, '×')));
    }
  }

  // open shows series ref ("id" or "dataset:id"); pre is its data when
  // Hello brought it (start-up), so that the chart shows without a call.
  // compare are series to draw beside it (--compare at start): the first
  // view with data is then the whole comparison.
  async open(ref: string, pre?: Opened, compare: string[] = []): Promise<void> {
    if (compare.length) {
      const infos = await Promise.all(compare.slice(0, MAX_COMPARE - 1).map((c) => api.info(c)));
      this.compared = infos.filter((i) => !i.error);
      const bad = infos.find((i) => i.error);
      if (bad) toast(bad.error!);
      pre = undefined; // Hello brought one series; the chart needs them all
    }
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
    // Frequency and aggregate start from the series' own each time.
    this.per.value = '';
    this.agg.value = 'last';
    this.agg.disabled = true;
    this.compared = this.compared.filter((c) => !(c.dataset === info.dataset && c.id === info.id));
    this.renderCompare();
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
        i.count ? chip('range', `${localPeriod(i.first, i.frequency)} – ${localPeriod(i.last, i.frequency)}`) : null,
        chip('latest', value(i.latest)), i.source ? chip('source', i.source) : null));
  }

  // preset sets a range relative to today ("-10Y"), which a copied
  // formula keeps relative: it moves with the date it is recalculated on.
  private preset(years: number): void {
    if (!this.current) return;
    this.from.value = years ? `-${years}Y` : '';
    this.to.value = '';
    void this.load();
  }

  // load fetches and shows the current series' points and formula; pre
  // is what Hello brought for the default range and frequency.
  async load(pre?: Opened): Promise<void> {
    if (!this.current) return;
    const my = ++this.loadSeq;
    const cur = this.current;
    const ref = this.ref();
    const per = this.per.value;
    const agg = per ? this.agg.value : '';
    const from = this.from.value, to = this.to.value;
    const gopts = { per, agg, fill: '', desc: false, headers: false, last: 0 };
    // Compared series: one formula with every id, as the chart shows them.
    const formula = this.compared.length ? api.compareFormula([cur.ref || cur.id, ...this.compared.map((x) => x.ref || x.id)], from, to, gopts)
      : pre && !per && !from && !to ? Promise.resolve(pre.formula)
        : api.formula(cur.ref || cur.id, from, to, gopts);
    let shown: Shown | undefined;
    let error = '', note = '';
    if (this.compared.length) {
      const c = await api.compare([ref, ...this.compared.map((x) => `${x.dataset}:${x.id}`)], from, to, per, agg);
      error = c.error ?? '';
      note = c.note ?? '';
      if (!error) {
        shown = { times: c.times, freq: per || cur.frequency, units: c.units,
          cols: c.series.map((x) => ({ ref: x.ref, id: x.id, unit: x.unit, values: x.values, decimals: decimalsOf(x.values), axis: x.axis })) };
      }
    } else {
      const s = pre && !per && !from && !to ? pre.series : await api.series(ref, from, to, per, agg);
      error = s.error ?? '';
      note = s.note ?? '';
      if (!error) {
        shown = { times: s.times, freq: s.frequency, units: [s.unit],
          cols: [{ ref, id: s.id, unit: s.unit, values: s.values, decimals: decimalsOf(s.values), axis: 0 }] };
      }
    }
    const f = await formula;
    if (my !== this.loadSeq) return;
    clear(this.msg);
    // A formula that gives no data today still reads (a relative range may
    // reach data later): its text shows with the reason as its title.
    this.formula.textContent = f.text ?? '';
    this.formula.title = f.error ? f.error : `Spills to ${num(f.rows)} rows × ${f.cols} columns`;
    if (error || !shown) {
      this.msg.append(errorBox(error)!);
      this.chart.clear();
      clear(this.table);
      return;
    }
    if (note) this.msg.append(h('div', { class: 'note' }, note));
    this.data = shown;
    const label = (c: Shown['cols'][number]) => (c.unit ? `${c.id} (${c.unit})` : c.id);
    if (shown.cols.length === 1) {
      this.chart.set(shown.times, shown.cols[0].values, label(shown.cols[0]), shown.freq, shown.cols[0].decimals);
    } else {
      this.chart.setMany(shown.times, shown.cols.map((c) => ({ label: label(c), values: c.values, axis: c.axis, decimals: c.decimals })), shown.freq, shown.units);
    }
    this.chartBox.dataset.series = String(shown.cols.length);
    this.chartBox.dataset.points = String(shown.times.length);
    this.shown = 0;
    clear(this.table);
    this.renderTable();
    reportReady('explorer');
  }

  // renderTable shows the points newest first, a page at a time: a
  // column per series, each with its own count of decimals.
  private renderTable(): void {
    const s = this.data;
    if (!s) return;
    let tbody = this.table.querySelector('tbody');
    if (!tbody) {
      tbody = h('tbody');
      const heads = s.cols.length === 1
        ? [h('th', { class: 'num' }, s.cols[0].unit ? `Value (${s.cols[0].unit})` : 'Value')]
        : s.cols.map((c) => h('th', { class: 'num' }, c.unit ? `${c.id} (${c.unit})` : c.id));
      this.table.append(h('table', { class: 'grid compact' }, h('thead', {}, h('tr', {}, h('th', {}, 'Period'), ...heads)), tbody));
    }
    const n = s.times.length;
    const end = Math.min(n, this.shown + TABLE_PAGE);
    const frag = document.createDocumentFragment();
    for (let k = this.shown; k < end; k++) {
      const i = n - 1 - k;
      frag.append(h('tr', {}, h('td', { 'data-t': s.times[i] }, localPeriod(s.times[i], s.freq)),
        ...s.cols.map((c) => h('td', { class: 'num' }, fixed(c.values[i], c.decimals)))));
    }
    tbody.append(frag);
    this.shown = end;
    this.table.querySelector('.more')?.remove();
    if (end < n) {
      this.table.append(h('button', { class: 'btn ghost more', onclick: () => this.renderTable() }, `Show more (${num(n - end)} older)`));
    }
  }

  // tableText is the whole table (every row, not only those shown), oldest
  // first, with ISO dates and plain numbers, so that a spreadsheet reads it
  // in any locale; sep is a tab or a comma.
  tableText(sep: string): string {
    const s = this.data;
    if (!s) return '';
    const cell = (x: string) => (sep === ',' && /[",\n]/.test(x) ? `"${x.replace(/"/g, '""')}"` : x.replace(/[\t\n]/g, ' '));
    const lines = [['Date', ...s.cols.map((c) => c.id)].map(cell).join(sep)];
    for (let i = 0; i < s.times.length; i++) {
      lines.push([period(s.times[i], s.freq === 'H' ? 'H' : 'D'),
        ...s.cols.map((c) => (c.values[i] == null || !Number.isFinite(c.values[i]!) ? '' : String(c.values[i])))].join(sep));
    }
    return lines.join('\n') + '\n';
  }

  private async copyTable(sep: string): Promise<void> {
    const text = this.tableText(sep);
    if (!text) {
      toast('Choose a series first');
      return;
    }
    const n = this.data!.times.length;
    toast((await copyText(text)) ? `Copied ${num(n)} rows as ${sep === ',' ? 'CSV' : 'TSV'}` : 'Could not copy the table');
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
    exportSelection.add(this.current.ref || this.current.id);
    toast(`${this.current.id} added to the export`);
    void this.shell;
  }
}

function select(id: string, options: [string, string][]): HTMLSelectElement {
  return h('select', { id }, ...options.map(([v, label]) => h('option', { value: v }, label)));
}
