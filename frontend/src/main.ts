import 'uplot/dist/uPlot.min.css';
import './style.css';
import { api, waitForBindings } from './api';
import { h, clear } from './util';
import { StatusView } from './views/status';
import { SyncView } from './views/sync';
import { ExplorerView } from './views/explorer';
import { ExportView } from './views/export';
import { ExcelView } from './views/excel';
import { SettingsView } from './views/settings';

// A view is one tab of the window.
export interface View {
  id: string;
  title: string;
  icon: string; // an SVG path
  el: HTMLElement;
  show(): void;
  hide(): void;
}

// The shell: a sidebar of tabs and the current view. Views talk to each
// other through the small shared state in state.ts and app.go(id).
export class Shell {
  views: View[] = [];
  current?: View;
  nav = h('nav', { class: 'nav', 'aria-label': 'Views' });
  main = h('main', { class: 'main' });
  footer = h('div', { class: 'nav-foot' });

  constructor(root: HTMLElement) {
    clear(root);
    const brand = h('div', { class: 'brand' }, h('span', { class: 'logo', 'aria-hidden': 'true' }), h('span', {}, 'EnergyScope'));
    root.append(h('div', { class: 'shell' }, h('aside', { class: 'side' }, brand, this.nav, this.footer), this.main));
  }

  add(v: View): void {
    this.views.push(v);
    const icon = `<svg viewBox="0 0 24 24" aria-hidden="true"><path d="${v.icon}"/></svg>`;
    const b = h('button', { class: 'tab', id: `tab-${v.id}`, 'data-view': v.id, onclick: () => this.go(v.id) });
    b.innerHTML = icon;
    b.append(h('span', {}, v.title));
    this.nav.append(b);
    v.el.classList.add('view');
    v.el.id = `view-${v.id}`;
    v.el.hidden = true;
    this.main.append(v.el);
  }

  go(id: string): void {
    const v = this.views.find((x) => x.id === id);
    if (!v || v === this.current) return;
    this.current?.hide();
    if (this.current) this.current.el.hidden = true;
    for (const b of this.nav.querySelectorAll('.tab')) b.classList.toggle('active', (b as HTMLElement).dataset.view === id);
    this.current = v;
    v.el.hidden = false;
    v.show();
    history.replaceState(null, '', `#${id}`);
  }
}

let readySent = false;
// reportReady tells the Go side the first view with data is on screen
// (start-up time; the smoke test waits for it).
export function reportReady(view: string): void {
  if (readySent) return;
  readySent = true;
  requestAnimationFrame(() => requestAnimationFrame(() => void api.ready(view)));
}

async function start(): Promise<void> {
  const root = document.getElementById('app')!;
  if (!(await waitForBindings())) {
    root.append(h('div', { class: 'error boot' }, 'The window could not connect to the EnergyScope app. Restart it.'));
    return;
  }
  // One call brings the first view's data (Hello.status or Hello.open).
  const hello = await api.hello();
  const shell = new Shell(root);
  const explorer = new ExplorerView(shell);
  const status = new StatusView(shell, hello.status);
  shell.add(status);
  shell.add(new SyncView());
  shell.add(explorer);
  shell.add(new ExportView());
  shell.add(new ExcelView());
  shell.add(new SettingsView());
  shell.footer.append(h('div', { class: 'muted small', title: hello.home }, `v${hello.version}`));
  const hash = location.hash.slice(1);
  if (hello.error) {
    shell.go('status'); // says why, and Settings can fix it
  } else if (hello.openSeries) {
    shell.go('explorer');
    void explorer.open(hello.openSeries, hello.open, hello.compare ?? []);
  } else if (shell.views.some((v) => v.id === hash)) {
    shell.go(hash);
  } else {
    shell.go('status');
  }
}

void start();
