import { api, Settings } from '../api';
import type { View } from '../main';
import { h, clear, errorBox } from '../util';

export class SettingsView implements View {
  id = 'settings';
  title = 'Settings';
  icon = 'M19.14 12.94c.04-.3.06-.61.06-.94 0-.32-.02-.64-.07-.94l2.03-1.58a.49.49 0 0 0 .12-.61l-1.92-3.32a.49.49 0 0 0-.59-.22l-2.39.96c-.5-.38-1.03-.7-1.62-.94l-.36-2.54a.48.48 0 0 0-.48-.41h-3.84c-.24 0-.43.17-.47.41l-.36 2.54c-.59.24-1.13.57-1.62.94l-2.39-.96a.49.49 0 0 0-.59.22L2.74 8.87c-.12.21-.08.47.12.61l2.03 1.58c-.05.3-.09.63-.09.94s.02.64.07.94l-2.03 1.58a.49.49 0 0 0-.12.61l1.92 3.32c.12.22.37.29.59.22l2.39-.96c.5.38 1.03.7 1.62.94l.36 2.54c.05.24.24.41.48.41h3.84c.24 0 .44-.17.47-.41l.36-2.54c.59-.24 1.13-.56 1.62-.94l2.39.96c.22.08.47 0 .59-.22l1.92-3.32c.12-.22.07-.47-.12-.61l-2.01-1.58zM12 15.6c-1.98 0-3.6-1.62-3.6-3.6s1.62-3.6 3.6-3.6 3.6 1.62 3.6 3.6-1.62 3.6-3.6 3.6z';
  el = h('section');
  private form = h('form', { class: 'panel form settings', autocomplete: 'off' });
  private msg = h('div');
  private s?: Settings;

  constructor() {
    this.el.append(h('header', { class: 'view-head' }, h('h1', {}, 'Settings')), this.msg, this.form);
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      void this.save();
    });
  }

  show(): void {
    void this.load();
  }

  hide(): void {}

  private async load(): Promise<void> {
    this.render(await api.getSettings());
  }

  private render(s: Settings): void {
    this.s = s;
    clear(this.form);
    clear(this.msg);
    if (s.error) this.msg.append(errorBox(s.error)!);
    if (s.message) this.msg.append(h('div', { class: 'ok-box' }, s.message));
    const field = (label: string, input: HTMLElement, help: string) => h('label', { class: 'setting' }, h('span', { class: 'setting-label' }, label), input, h('span', { class: 'small muted' }, help));
    const home = h('input', { id: 'set-home', name: 'home', value: s.home, placeholder: s.defaultHome, disabled: s.homeFixed }) as HTMLInputElement;
    const browse = h('button', { type: 'button', class: 'btn', disabled: s.homeFixed, onclick: async () => {
      const p = await api.chooseFolder(home.value || s.activeHome);
      if (p.path) home.value = p.path;
    } }, 'Browse…');
    this.form.append(
      h('h3', {}, 'Server'),
      field('Server URL', h('input', { id: 'set-server', name: 'server', value: s.server, placeholder: 'https://energyscope.example.com (empty: work offline)' }), 'The central EnergyScope server to sync from. Several replicas, comma-separated, are tried in order: the sync moves to the next when one fails.'),
      field('Access token', h('input', { id: 'set-token', name: 'token', type: 'password', value: s.token, placeholder: 'from your administrator' }), 'Kept in your settings file, readable by you only.'),
      field('Datasets', h('input', { id: 'set-datasets', name: 'datasets', value: s.datasets.join(', '), placeholder: 'all of the server’s' }), 'Comma-separated; empty syncs every dataset.'),
      field('Download limit (MB/s)', h('input', { id: 'set-bandwidth', name: 'bandwidth', type: 'number', min: 0, step: 'any', value: s.bandwidth ? s.bandwidth / 1e6 : '' , placeholder: 'no limit' }), 'Caps snapshot downloads.'),
      h('h3', {}, 'This computer'),
      field('Data folder', h('div', { class: 'row gap' }, home, browse), s.homeFixed ? `Given at start (--home or ES_HOME): ${s.activeHome}` : `In use: ${s.activeHome}`),
      field('Bridge port', h('input', { id: 'set-port', name: 'port', type: 'number', min: 1, max: 65535, value: s.port || '', placeholder: String(s.defaultPort) }), 'The port Excel’s add-in calls on 127.0.0.1. After a change, sideload the add-in again.'),
      h('div', { class: 'row gap top-gap' }, h('button', { class: 'btn primary', id: 'save-settings', type: 'submit' }, 'Save'), h('span', { class: 'small muted' }, `Saved in ${s.file}`)));
  }

  private async save(): Promise<void> {
    if (!this.s) return;
    const v = (name: string) => (this.form.querySelector(`[name=${name}]`) as HTMLInputElement).value.trim();
    const mbps = parseFloat(v('bandwidth'));
    const s: Settings = {
      ...this.s,
      server: v('server'), token: v('token'), home: v('home'),
      port: parseInt(v('port'), 10) || 0,
      datasets: v('datasets').split(',').map((x) => x.trim()).filter(Boolean),
      bandwidth: Number.isFinite(mbps) && mbps > 0 ? Math.round(mbps * 1e6) : 0,
      message: undefined, error: undefined,
    };
    this.render(await api.saveSettings(s));
  }
}
