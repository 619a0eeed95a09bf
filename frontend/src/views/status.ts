import { api, on, Status } from '../api';
import type { Shell, View } from '../main';
import { reportReady } from '../main';
import { PolledView } from './polled';
import { h, clear, num, bytes, ago, badge, errorBox } from '../util';

export class StatusView extends PolledView implements View {
  id = 'status';
  title = 'Status';
  icon = 'M3 13h8V3H3v10zm0 8h8v-6H3v6zm10 0h8V11h-8v10zm0-18v6h8V3h-8z';

  // initial is the Status that came with Hello: the first show draws it
  // without asking again.
  constructor(private shell: Shell, private initial?: Status) {
    super(2000);
    this.el.append(h('header', { class: 'view-head' }, h('h1', {}, 'Status'), h('p', { class: 'muted' }, 'Your local copy of the data, the sync with the server and the bridge to Excel.')), this.body);
    on('status:changed', () => this.visible() && this.refresh());
  }

  private visible(): boolean {
    return !this.el.hidden;
  }

  protected shown(): void {
    if (this.initial) {
      this.render(this.initial);
      this.initial = undefined;
      reportReady('status');
    } else {
      void this.refresh();
    }
  }

  async refresh(): Promise<void> {
    const s = await api.status();
    this.render(s);
    reportReady('status');
  }

  private render(s: Status): void {
    clear(this.body);
    const mode = !s.server ? badge('Offline (no server set)', 'muted') : s.paused ? badge('Paused', 'warn') : s.online ? badge('Online', 'ok') : badge('Offline', 'bad');
    const cards = h('div', { class: 'cards' },
      card('Datasets', num(s.datasets.length)),
      card('Series', num(s.series)),
      card('Points', num(s.rows)),
      card('On disk', bytes(s.diskBytes)),
    );
    const facts = h('div', { class: 'panel facts' },
      fact('Data folder', h('code', {}, s.home || '—')),
      fact('Sync', h('span', {}, mode, s.server ? h('span', { class: 'muted' }, ` ${s.current || s.server}`) : null, s.server ? serversNote(s.server, s.failovers) : null)),
      fact('Excel bridge', s.bridge.running ? h('span', {}, badge('Running', 'ok'), ' ', h('code', {}, s.bridge.url ?? '')) : h('span', {}, badge('Stopped', 'bad'), ' ', h('span', { class: 'muted' }, s.bridge.error ?? ''))),
    );
    this.body.append(errorBox(s.error) ?? '', s.lastError ? h('div', { class: 'warn-box' }, s.lastError) : '', cards, facts);

    if (s.datasets.length === 0) {
      this.body.append(h('div', { class: 'panel empty' },
        h('h3', {}, 'No data yet'),
        h('p', {}, 'Set a server in Settings to download datasets, or cook files into the data folder with ', h('code', {}, 'es cook'), '.'),
        h('button', { class: 'btn', onclick: () => this.shell.go('settings') }, 'Open Settings')));
      return;
    }
    const rows = s.datasets.map((d) => h('tr', {},
      h('td', {}, h('strong', {}, d.name)),
      h('td', {}, stateBadge(d.state)),
      h('td', { class: 'num' }, num(d.series)),
      h('td', { class: 'num' }, num(d.rows)),
      h('td', { class: 'num' }, num(d.seq)),
      h('td', { class: 'num' }, d.headSeq || d.state === 'live' ? num(d.lag) : '—'),
      h('td', {}, ago(d.lastSyncMs)),
      h('td', { class: 'num' }, bytes(d.diskBytes)),
      h('td', { class: 'mono small', title: d.snapshotId }, d.snapshotId.slice(0, 12)),
    ));
    this.body.append(h('div', { class: 'panel' }, h('table', { class: 'grid', id: 'datasets' },
      h('thead', {}, h('tr', {}, ...['Dataset', 'State', 'Series', 'Points', 'Seq', 'Lag', 'Last sync', 'Disk', 'Snapshot'].map((x) => h('th', {}, x)))),
      h('tbody', {}, ...rows))));
  }
}

function card(label: string, v: string): HTMLElement {
  return h('div', { class: 'card' }, h('div', { class: 'card-value' }, v), h('div', { class: 'card-label' }, label));
}

function fact(label: string, v: Node): HTMLElement {
  return h('div', { class: 'fact' }, h('div', { class: 'fact-label' }, label), h('div', {}, v));
}

export function stateBadge(state: string): HTMLElement {
  switch (state) {
    case 'live':
      return badge('live', 'ok');
    case 'downloading':
    case 'catching up':
    case 'rebasing':
    case 'connecting':
      return badge(state, 'warn');
    default:
      return badge(state || 'offline', 'muted');
  }
}

// serversNote says, for a list of several servers, how many there are and
// how often the sync moved to the next one.
export function serversNote(list: string, failovers: number): HTMLElement | string {
  const n = list.split(',').filter((x) => x.trim() !== '').length;
  if (n < 2) return '';
  return h('span', { class: 'muted', id: 'sync-servers' }, ` (1 of ${n} servers; ${failovers} failover${failovers === 1 ? '' : 's'})`);
}
