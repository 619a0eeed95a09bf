import { api, on, Sync } from '../api';
import type { View } from '../main';
import { h, clear, num, bytes, duration, ago, badge, errorBox, toast } from '../util';
import { PolledView } from './polled';
import { stateBadge, serversNote } from './status';

export class SyncView extends PolledView implements View {
  id = 'sync';
  title = 'Sync';
  icon = 'M12 4V1L8 5l4 4V6c3.31 0 6 2.69 6 6 0 1.01-.25 1.97-.7 2.8l1.46 1.46A7.93 7.93 0 0 0 20 12c0-4.42-3.58-8-8-8zm0 14c-3.31 0-6-2.69-6-6 0-1.01.25-1.97.7-2.8L5.24 7.74A7.93 7.93 0 0 0 4 12c0 4.42 3.58 8 8 8v3l4-4-4-4v3z';

  constructor() {
    super(1000);
    this.el.append(h('header', { class: 'view-head' }, h('h1', {}, 'Sync'), h('p', { class: 'muted' }, 'Datasets kept in step with the server. Local data keeps working offline.')), this.body);
    on<Sync>('sync:progress', (s) => {
      if (!this.el.hidden && s) this.render(s);
    });
  }

  async refresh(): Promise<void> {
    this.render(await api.syncProgress());
  }

  private render(s: Sync): void {
    // Keep the add-dataset input's text across refreshes.
    const typing = (this.body.querySelector('#add-dataset') as HTMLInputElement | null)?.value ?? '';
    const focused = document.activeElement?.id === 'add-dataset';
    clear(this.body);
    this.body.append(errorBox(s.error) ?? '');
    if (!s.configured) {
      this.body.append(h('div', { class: 'panel empty' },
        h('h3', {}, 'Working offline'),
        h('p', {}, 'No server is set: the app serves the data already in its data folder. Set a server and token in Settings to sync.')));
    } else {
      const state = s.paused ? badge('Paused', 'warn') : s.online ? badge('Online', 'ok') : badge('Offline', 'bad');
      const toggle = s.paused
        ? h('button', { class: 'btn primary', id: 'resume', onclick: async () => this.render(await api.resume()) }, 'Resume')
        : h('button', { class: 'btn', id: 'pause', onclick: async () => this.render(await api.pause()) }, 'Pause');
      this.body.append(h('div', { class: 'panel row spread' },
        h('div', {}, state, ' ', h('code', { id: 'sync-server' }, s.current || s.server), serversNote(s.server, s.failovers), h('span', { class: 'muted' }, `  last sync ${ago(s.lastSyncMs)}`)),
        toggle));
      if (s.lastError) this.body.append(h('div', { class: 'warn-box' }, s.lastError));
    }

    const all = s.subscribed.length === 0;
    const rows = s.datasets.map((d) => {
      const pct = d.bytesTotal > 0 ? Math.min(100, (100 * d.bytesDone) / d.bytesTotal) : d.state === 'live' || d.local ? 100 : 0;
      const dl = d.state === 'downloading' && d.bytesTotal > 0;
      const subscribed = all || s.subscribed.includes(d.name);
      const known = d.headSeq > 0 || d.state === 'live'; // the server's seq is known
      return h('tr', {},
        h('td', {}, h('label', { class: 'check' },
          h('input', { type: 'checkbox', class: 'sub', 'data-name': d.name, checked: subscribed, disabled: !s.configured }),
          h('strong', {}, d.name))),
        h('td', {}, stateBadge(d.state)),
        h('td', { class: 'wide' },
          h('div', { class: 'bar', title: `${pct.toFixed(0)}%` }, h('div', { class: 'bar-fill', style: `width:${pct}%` })),
          h('div', { class: 'small muted' }, dl ? `${bytes(d.bytesDone)} of ${bytes(d.bytesTotal)} · ${bytes(d.rate)}/s · ${duration(d.etaSeconds)} left` : d.local ? 'on this computer' : 'not downloaded')),
        h('td', { class: 'num' }, num(d.seq)),
        h('td', { class: 'num' }, known ? num(d.headSeq) : '—'),
        h('td', { class: 'num' }, known ? num(d.lag) : '—'),
        h('td', {}, ago(d.lastSyncMs)));
    });
    const table = h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ...['Dataset', 'State', 'Progress', 'Seq', 'Server seq', 'Lag', 'Last update'].map((x) => h('th', {}, x)))),
      h('tbody', {}, ...rows));
    const add = h('input', { id: 'add-dataset', placeholder: 'dataset name', value: typing, disabled: !s.configured }) as HTMLInputElement;
    const apply = async () => {
      const names = [...this.body.querySelectorAll<HTMLInputElement>('input.sub')].filter((c) => c.checked).map((c) => c.dataset.name!);
      if (add.value.trim()) names.push(add.value.trim());
      const everyChecked = !add.value.trim() && names.length === s.datasets.length && all;
      const r = await api.setDatasets(everyChecked ? [] : names);
      add.value = '';
      this.render(r);
      if (!r.error) toast('Subscriptions saved');
    };
    this.body.append(h('div', { class: 'panel' },
      s.datasets.length ? table : h('p', { class: 'muted' }, 'No datasets yet.'),
      h('div', { class: 'row gap top-gap' },
        h('span', { class: 'muted' }, all ? 'Subscribed to every dataset of the server.' : `Subscribed to ${s.subscribed.join(', ')}.`),
        h('span', { class: 'grow' }),
        add,
        h('button', { class: 'btn', id: 'apply-datasets', onclick: apply, disabled: !s.configured }, 'Apply'),
        h('button', { class: 'btn ghost', onclick: async () => this.render(await api.setDatasets([])), disabled: !s.configured || all }, 'Subscribe to all'))));
    if (focused) add.focus();
  }
}
