import { api, copyText, Excel } from '../api';
import type { View } from '../main';
import { h, clear, badge, errorBox, toast } from '../util';

export class ExcelView implements View {
  id = 'excel';
  title = 'Excel';
  icon = 'M3 3h18v18H3V3zm2 2v4h6V5H5zm8 0v4h6V5h-6zm-8 6v4h6v-4H5zm8 0v4h6v-4h-6zm-8 6v2h6v-2H5zm8 0v2h6v-2h-6z';
  el = h('section');
  private body = h('div');

  constructor() {
    this.el.append(h('header', { class: 'view-head' }, h('h1', {}, 'Excel'), h('p', { class: 'muted' }, 'ES.Get, ES.Latest and ES.Live in your workbooks, answered by this app over a local, encrypted connection.')), this.body);
  }

  show(): void {
    void this.refresh();
  }

  hide(): void {}

  async refresh(): Promise<void> {
    this.render(await api.excelInfo());
  }

  private render(e: Excel): void {
    clear(this.body);
    if (!e.running) {
      this.body.append(errorBox(e.error || 'The bridge is not running.')!);
      return;
    }
    const copyRow = (label: string, v: string, id: string) => h('div', { class: 'fact' },
      h('div', { class: 'fact-label' }, label),
      h('div', { class: 'row gap' }, h('code', { id, class: 'grow wrap' }, v),
        h('button', { class: 'btn ghost small', onclick: async () => toast((await copyText(v)) ? 'Copied' : 'Could not copy') }, 'Copy')));
    this.body.append(
      errorBox(e.error) ?? '',
      h('div', { class: 'panel facts' },
        h('div', { class: 'fact' }, h('div', { class: 'fact-label' }, 'Bridge'), h('div', {}, badge('Running', 'ok'), ' ', h('code', {}, e.bridgeUrl))),
        copyRow('Add-in manifest (URL)', e.manifestUrl, 'manifest-url'),
        copyRow('Add-in manifest (file)', e.manifestPath, 'manifest-path'),
        h('div', { class: 'fact' }, h('div', { class: 'fact-label' }, 'Certificate'),
          h('div', {}, e.caTrusted ? badge('Trusted', 'ok') : badge('Not trusted yet', 'warn'), ' ', h('span', { class: 'muted' }, e.caName),
            h('div', { class: 'small muted mono wrap' }, `SHA-256 ${e.caSha256}`),
            h('div', { class: 'small muted' }, e.caPath))),
        e.caTrusted ? null : copyRow('Trust it with', e.trustCommand, 'trust-command'),
        e.caTrusted ? null : h('div', { class: 'row' }, h('button', { class: 'btn primary', id: 'trust', onclick: async () => this.render(await api.trustCA()) }, 'Trust certificate'))),
      h('div', { class: 'panel' }, h('h3', {}, 'Set up Excel, step by step'), h('ol', { class: 'steps' }, ...e.steps.map((s) => h('li', {}, s)))));
  }
}
