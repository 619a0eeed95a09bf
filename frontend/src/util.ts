// Small DOM and formatting helpers; no framework.

type Attrs = Record<string, string | number | boolean | EventListener | undefined | null>;
type Child = Node | string | number | null | undefined | false;

// h builds an element: h('div', {class: 'x', onclick: fn}, 'text', child).
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      e.addEventListener(k.slice(2), v as EventListener);
    } else if (k === 'value' && 'value' in e) {
      (e as HTMLInputElement).value = String(v);
    } else if (k === 'checked' && 'checked' in e) {
      (e as HTMLInputElement).checked = Boolean(v);
    } else {
      e.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(e, ...children);
  return e;
}

export function append(parent: Element, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(e: Element): void {
  while (e.firstChild) e.removeChild(e.firstChild);
}

export function debounce<A extends unknown[]>(fn: (...a: A) => void, ms: number): (...a: A) => void {
  let t: ReturnType<typeof setTimeout> | undefined;
  return (...a: A) => {
    if (t) clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

// locale is the user's locale if the platform names a valid one: a web
// view started with LANG=C reports "C", which Intl refuses.
export const locale: string = (() => {
  try {
    new Intl.NumberFormat(navigator.language);
    return navigator.language;
  } catch {
    return 'en-US';
  }
})();

const nf = new Intl.NumberFormat(locale);
export function num(n: number): string {
  return nf.format(n);
}

// valueFormats[d] formats with up to d decimals: an Intl.NumberFormat is
// slow to make (a table or an axis formats hundreds of values).
const valueFormats = new Map<number, Intl.NumberFormat>();

// value formats a data value with up to 6 significant decimals.
export function value(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  const digits = a >= 1000 ? 2 : a >= 1 ? 4 : 6;
  let f = valueFormats.get(digits);
  if (!f) {
    f = new Intl.NumberFormat(locale, { maximumFractionDigits: digits });
    valueFormats.set(digits, f);
  }
  return f.format(v);
}

// decimalsOf is the fewest decimals (at most 6) that show every value of a
// series exactly: a series is shown with that many everywhere, so that its
// numbers line up (28.80 under 29.15, not 28.8).
// Values that 6 decimals do not show exactly (averages, changes) are
// computed, not typed: they get 2 decimals, or 4 when all are below 1.
export function decimalsOf(values: (number | null)[]): number {
  let d = 0;
  let big = 0;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    big = Math.max(big, Math.abs(v));
    while (d < 7) {
      const s = v * 10 ** d;
      if (Math.abs(s - Math.round(s)) <= Math.max(1e-9, 1e-12 * Math.abs(s))) break;
      d++;
    }
  }
  if (d <= 6) return d;
  return big >= 1 ? 2 : 4;
}

const fixedFormats = new Map<number, Intl.NumberFormat>();

// fixed formats v with exactly d decimals in the user's locale.
export function fixed(v: number | null | undefined, d: number): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  let f = fixedFormats.get(d);
  if (!f) {
    f = new Intl.NumberFormat(locale, { minimumFractionDigits: d, maximumFractionDigits: d });
    fixedFormats.set(d, f);
  }
  return f.format(v);
}

const dateFormats = new Map<string, Intl.DateTimeFormat>();

// localPeriod formats a period (unix seconds UTC) for its frequency in the
// user's locale: 15/03/2010 or 3/15/2010, Mar 2010, 2010-Q1, 2010.
export function localPeriod(t: number, freq: string): string {
  const opts: Record<string, Intl.DateTimeFormatOptions> = {
    H: { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC' },
    M: { year: 'numeric', month: 'short', timeZone: 'UTC' },
    A: { year: 'numeric', timeZone: 'UTC' },
  };
  if (freq === 'Q') return period(t, freq);
  const key = opts[freq] ? freq : 'D';
  let f = dateFormats.get(key);
  if (!f) {
    f = new Intl.DateTimeFormat(locale, opts[key] ?? { year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' });
    dateFormats.set(key, f);
  }
  return f.format(new Date(t * 1000));
}

export function bytes(n: number): string {
  if (!n) return '0 B';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(n >= 100 || i === 0 ? 0 : 1)} ${u[i]}`;
}

export function duration(s: number): string {
  if (!Number.isFinite(s) || s <= 0) return '—';
  if (s < 60) return `${Math.ceil(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

export function ago(ms: number): string {
  if (!ms) return 'never';
  const s = (Date.now() - ms) / 1000;
  if (s < 5) return 'just now';
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString(locale);
}

// period formats a period (unix seconds UTC) for its frequency.
export function period(t: number, freq: string): string {
  const d = new Date(t * 1000);
  const iso = d.toISOString();
  switch (freq) {
    case 'H':
      return `${iso.slice(0, 10)} ${iso.slice(11, 16)}`;
    case 'M':
      return iso.slice(0, 7);
    case 'Q':
      return `${iso.slice(0, 4)}-Q${Math.floor(d.getUTCMonth() / 3) + 1}`;
    case 'A':
      return iso.slice(0, 4);
    default:
      return iso.slice(0, 10);
  }
}

export const freqNames: Record<string, string> = { H: 'hourly', D: 'daily', W: 'weekly', M: 'monthly', Q: 'quarterly', A: 'annual' };

export function badge(text: string, kind: 'ok' | 'warn' | 'bad' | 'muted' = 'muted'): HTMLElement {
  return h('span', { class: `badge ${kind}` }, text);
}

export function errorBox(msg: string | undefined): HTMLElement | null {
  return msg ? h('div', { class: 'error', role: 'alert' }, msg) : null;
}

export function toast(msg: string): void {
  const t = h('div', { class: 'toast' }, msg);
  document.body.append(t);
  setTimeout(() => t.classList.add('gone'), 1800);
  setTimeout(() => t.remove(), 2300);
}
