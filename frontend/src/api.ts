// The Go side, as Wails binds it: one struct per view (app.App.Bind()),
// window.go.app.<View>.<Method>(...) returning a Promise of the DTO
// (app/dto.go). Every DTO that can fail carries an `error` sentence; the
// methods never reject on purpose, but a broken bridge might, so call()
// turns a rejection into an error DTO too.

// Hello carries the data of the first view, so that it shows after one call:
// open when the app was started with a series (--open), else status.
export interface Hello {
  version: string; home: string; platform: string; openSeries?: string; compare?: string[];
  status?: Status; open?: Opened; error?: string;
}
export interface Opened { info: Info; series: Series; formula: Formula }

export interface Dataset {
  name: string; snapshotId: string; epoch: number; seq: number; headSeq: number; lag: number;
  series: number; rows: number; pendingRows: number; createdMs: number; lastSyncMs: number;
  state: string; diskBytes: number;
}
export interface Status {
  home: string; server: string; current?: string; failovers: number; online: boolean; paused: boolean; lastError?: string;
  datasets: Dataset[]; series: number; rows: number; diskBytes: number;
  bridge: { running: boolean; url?: string; error?: string };
  error?: string;
}
export interface SyncDataset {
  name: string; state: string; local: boolean; seq: number; headSeq: number; lag: number;
  file?: string; bytesDone: number; bytesTotal: number; rate: number; etaSeconds: number; lastSyncMs: number;
}
export interface Sync {
  configured: boolean; server: string; current?: string; failovers: number; online: boolean; paused: boolean; lastError?: string;
  lastSyncMs: number; subscribed: string[]; datasets: SyncDataset[]; error?: string;
}
export interface SearchHit { id: string; dataset: string; name: string; unit: string; frequency: string; source: string }
export interface FacetValue { value: string; count: number }
// Facets are the store's facet values with series counts (ExplorerView.Facets).
export interface Facets { series: number; datasets: FacetValue[]; sources: FacetValue[]; frequencies: FacetValue[]; units: FacetValue[]; error?: string }
export interface BrowseRequest { dataset: string; source: string; frequency: string; unit: string }
export interface BrowseResult { hits: SearchHit[]; total: number; more: boolean; error?: string }
export interface SearchResult { query: string; hits: SearchHit[]; more: boolean; micros: number; error?: string }
export interface Info {
  id: string; dataset: string; name: string; unit: string; source: string; frequency: string;
  frequencyName: string; first: number; last: number; count: number; latest: number | null;
  updatedMs: number; snapshotId: string; seq: number; pending: boolean; formula: string; ref: string; error?: string;
}
export interface Compared { ref: string; id: string; dataset: string; name: string; unit: string; axis: number; values: (number | null)[] }
export interface Comparison { times: number[]; series: Compared[]; units: string[]; truncated: boolean; note?: string; error?: string }
export interface SeriesChanged { dataset: string; ids: string[] }
export interface Series {
  id: string; name: string; unit: string; frequency: string; per: string; agg: string;
  times: number[]; values: (number | null)[]; truncated: boolean; note?: string; error?: string;
}
export interface GetOptions { per: string; agg: string; fill: string; desc: boolean; headers: boolean; last: number }
export interface Formula { text: string; rows: number; cols: number; error?: string }
export interface ExportRequest {
  series: string[]; from: string; to: string; per: string; agg: string; fill: string; formulas: boolean; path: string;
}
export interface ExportResult { path: string; series: number; rows: number; cells: number; bytes: number; millis: number; error?: string }
export interface ExportProgress { done: number; total: number }
export interface PathResult { path: string; error?: string }
export interface Excel {
  running: boolean; bridgeUrl: string; port: number; manifestUrl: string; manifestPath: string;
  caPath: string; caName: string; caSha256: string; caTrusted: boolean; trustCommand: string;
  steps: string[]; error?: string;
}
export interface Settings {
  server: string; token: string; home: string; port: number; datasets: string[]; bandwidth: number;
  file: string; defaultHome: string; defaultPort: number; activeHome: string; homeFixed: boolean;
  message?: string; error?: string;
}

declare global {
  interface Window {
    go?: { app?: Partial<Record<View, Record<string, (...args: unknown[]) => Promise<unknown>>>> };
    runtime?: {
      EventsOn(name: string, cb: (...data: unknown[]) => void): () => void;
      ClipboardSetText(text: string): Promise<boolean>;
    };
  }
}

// waitForBindings resolves once Wails (or a test's stub) has set up
// window.go; Wails injects it before the page's scripts, but be patient.
export async function waitForBindings(timeoutMs = 10000): Promise<boolean> {
  const start = Date.now();
  while (!window.go?.app?.Shell) {
    if (Date.now() - start > timeoutMs) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

// View is a struct the Go side binds (app.App.Bind), named as Wails names it.
export type View = 'Shell' | 'StatusView' | 'SyncView' | 'ExplorerView' | 'ExportView' | 'ExcelView' | 'SettingsView';

async function call<T>(view: View, method: string, ...args: unknown[]): Promise<T> {
  const fn = window.go?.app?.[view]?.[method];
  if (!fn) return { error: 'The app is not connected to its Go side.' } as T;
  try {
    return (await fn(...args)) as T;
  } catch (e) {
    return { error: `The app could not answer (${String(e)}).` } as T;
  }
}

export const api = {
  hello: () => call<Hello>('Shell', 'Hello'),
  ready: (view: string) => call<number>('Shell', 'Ready', view),
  status: () => call<Status>('StatusView', 'Status'),
  syncProgress: () => call<Sync>('SyncView', 'SyncProgress'),
  pause: () => call<Sync>('SyncView', 'Pause'),
  resume: () => call<Sync>('SyncView', 'Resume'),
  setDatasets: (names: string[]) => call<Sync>('SyncView', 'SetDatasets', names),
  search: (q: string) => call<SearchResult>('ExplorerView', 'Search', q),
  facets: () => call<Facets>('ExplorerView', 'Facets'),
  browse: (req: BrowseRequest) => call<BrowseResult>('ExplorerView', 'Browse', req),
  info: (id: string) => call<Info>('ExplorerView', 'Info', id),
  series: (id: string, from: string, to: string, per: string, agg: string) => call<Series>('ExplorerView', 'Series', id, from, to, per, agg),
  formula: (id: string, from: string, to: string, opts: GetOptions) => call<Formula>('ExplorerView', 'Formula', id, from, to, opts),
  compareFormula: (refs: string[], from: string, to: string, opts: GetOptions) => call<Formula>('ExplorerView', 'CompareFormula', refs, from, to, opts),
  compare: (refs: string[], from: string, to: string, per: string, agg: string) => call<Comparison>('ExplorerView', 'Compare', refs, from, to, per, agg),
  openFolder: (path: string) => call<PathResult>('ExportView', 'OpenFolder', path),
  exportSuggestion: (series: string[]) => call<PathResult>('ExportView', 'ExportSuggestion', series),
  chooseExportFile: (suggested: string) => call<PathResult>('ExportView', 'ChooseExportFile', suggested),
  chooseFolder: (start: string) => call<PathResult>('SettingsView', 'ChooseFolder', start),
  export: (req: ExportRequest) => call<ExportResult>('ExportView', 'Export', req),
  excelInfo: () => call<Excel>('ExcelView', 'ExcelInfo'),
  trustCA: () => call<Excel>('ExcelView', 'TrustCA'),
  getSettings: () => call<Settings>('SettingsView', 'GetSettings'),
  saveSettings: (s: Settings) => call<Settings>('SettingsView', 'SaveSettings', s),
};

// on subscribes to a Go event; it returns the unsubscribe function.
export function on<T>(name: string, cb: (data: T) => void): () => void {
  if (!window.runtime?.EventsOn) return () => {};
  return window.runtime.EventsOn(name, (...data: unknown[]) => cb(data[0] as T));
}

// copyText puts text on the clipboard through Wails (the web view's own
// clipboard API needs a secure context and a user gesture).
export async function copyText(text: string): Promise<boolean> {
  try {
    if (window.runtime?.ClipboardSetText) return await window.runtime.ClipboardSetText(text);
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}
