// UI test of the desktop frontend in headless Chromium (Debian's
// /usr/bin/chromium; playwright-core drives it and downloads nothing).
//
// Run by app/browser_test.go, which serves frontend/dist with a stub of
// Wails' window.go / window.runtime that forwards every call to the real
// Go bindings over a real store of the sample data:
//
//   node tests/ui.mjs URL ARTIFACTS_DIR EXPORT_PATH [SERVER_IN_USE]
//
// It prints one JSON line with what it saw and exits non-zero on the first
// failed check.
import { chromium } from 'playwright-core';

const [url, artifacts, exportPath, serverInUse] = process.argv.slice(2);
if (!url || !artifacts || !exportPath) {
  console.error('usage: node tests/ui.mjs URL ARTIFACTS_DIR EXPORT_PATH');
  process.exit(2);
}

const FORMULA = '=ES.Get("MSFT","2005-01","2008-12","per=Q","agg=avg")';
const out = { checks: [] };
const check = (name, ok, detail) => {
  out.checks.push({ name, ok: Boolean(ok), detail });
  if (!ok) throw new Error(`check failed: ${name}: ${JSON.stringify(detail)}`);
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const errors = [];
let code = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 }, colorScheme: 'dark' });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && errors.push(`console: ${m.text()}`));
  page.setDefaultTimeout(15000);

  // Status: the three sample datasets.
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForSelector('#datasets tbody tr');
  const datasets = await page.$$eval('#datasets tbody tr td:first-child', (tds) => tds.map((t) => t.textContent));
  check('status lists the datasets', datasets.join(',') === 'iowa,seattle,stocks', datasets);
  out.statusMs = Date.now() - t0;
  await page.screenshot({ path: `${artifacts}/ui-status.png` });

  // Explorer: search as you type.
  await page.click('#tab-explorer');
  await page.locator('#search').pressSequentially('msft', { delay: 40 });
  await page.waitForSelector('.hit[data-id="MSFT"]');
  const first = await page.$eval('.hit', (e) => e.dataset.id);
  check('search shows MSFT first', first === 'MSFT', first);
  await page.click('.hit[data-id="MSFT"]');
  await page.waitForFunction(() => document.querySelector('#series-title')?.textContent === 'MSFT');
  await page.waitForFunction(() => document.querySelectorAll('#table tbody tr').length > 0);

  const pixels = async () => page.$eval('#chart canvas', (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return { n, w: c.width, h: c.height };
  });
  const px = await pixels();
  check('chart canvas drawn', px.n > 2000 && px.w > 300, px);
  const rows = await page.$$eval('#table tbody tr', (r) => r.length);
  check('table has every MSFT month', rows === 123, rows);
  const top = await page.$$eval('#table tbody tr:first-child td', (t) => t.map((x) => x.textContent));
  // Dates in the user's locale (en-US here), the series' two decimals on every value.
  const monthName = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', timeZone: 'UTC' }).format(new Date(Date.UTC(2010, 2, 1)));
  check('table newest first, local dates, fixed decimals', top[0] === monthName && top[1] === (28.8).toLocaleString(undefined, { minimumFractionDigits: 2 }), top);

  // A range preset writes a relative date, which the formula keeps.
  await page.click('#preset-10Y');
  await page.waitForFunction(() => document.querySelector('#formula')?.textContent === '=ES.Get("MSFT","-10Y")');
  check('preset is relative', (await page.inputValue('#from')) === '-10Y', await page.inputValue('#from'));

  // Range, frequency, aggregate; the formula follows.
  await page.fill('#from', '2005-01');
  await page.fill('#to', '2008-12');
  await page.selectOption('#per', 'Q');
  await page.selectOption('#agg', 'avg');
  await page.waitForFunction((f) => document.querySelector('#formula')?.textContent === f, FORMULA);
  await page.waitForFunction(() => document.querySelectorAll('#table tbody tr').length === 16);
  await page.click('#copy-formula');
  await page.waitForFunction(() => window.__clipboard.length > 0);
  const copied = await page.evaluate(() => window.__clipboard[window.__clipboard.length - 1]);
  check('formula copied', copied === FORMULA, copied);
  out.formula = copied;
  const px2 = await pixels();
  check('chart redrawn for the quarters', px2.n > 500, px2);
  // Hover: the legend shows the value under the cursor.
  // The chart is rebuilt on a new frequency: wait until its overlay is
  // laid out again (boundingBox is null while it is detached).
  const over = page.locator('#chart .u-over');
  let box = null;
  for (let i = 0; i < 100 && !box; i++) {
    await over.waitFor({ state: 'visible' });
    box = await over.boundingBox();
    if (!box) await page.waitForTimeout(50);
  }
  // uPlot updates the legend from the mouse event on a later frame, and the
  // chart may be rebuilt once more as the table settles (a new overlay sees
  // no cursor until the mouse moves again): move and read until the legend
  // shows the hovered point, for up to ~5 s.
  const hovered = (t) => /\d/.test(t) && /Q\d/.test(t);
  let legend = '';
  for (let i = 0; i < 50 && !hovered(legend); i++) {
    box = (await over.boundingBox()) ?? box;
    await page.mouse.move(box.x + box.width * (0.5 + (i % 2) * 0.01), box.y + box.height * 0.5);
    await page.waitForTimeout(i === 0 ? 20 : 100);
    legend = await page.$eval('#chart .u-legend', (e) => e.textContent);
  }
  check('legend shows hovered values', hovered(legend), legend);
  await page.screenshot({ path: `${artifacts}/ui-explorer.png` });
  await page.click('#add-export');

  // Copy the table as TSV and CSV: every row, oldest first, ISO dates.
  await page.click('#copy-tsv');
  await page.waitForFunction(() => window.__clipboard.length > 1);
  const tsv = await page.evaluate(() => window.__clipboard[window.__clipboard.length - 1]);
  const tsvLines = tsv.trim().split('\n');
  check('TSV copied', tsvLines.length === 17 && tsvLines[0] === 'Date\tMSFT' && /^2005-01-01\t\d+(\.\d+)?$/.test(tsvLines[1]), tsvLines.slice(0, 3));
  await page.click('#copy-csv');
  await page.waitForFunction(() => window.__clipboard.length > 2);
  const csv = await page.evaluate(() => window.__clipboard[window.__clipboard.length - 1]);
  check('CSV copied', csv.startsWith('Date,MSFT\n2005-01-01,'), csv.slice(0, 40));

  // Compare: IBM (same unit) and Iowa's fossil fuels (a second unit, right-hand axis).
  for (const [q, sel] of [['IBM', '.hit[data-id="IBM"]'], ['fossil', '.hit[data-id="Fossil Fuels"]']]) {
    await page.click('#add-compare');
    await page.fill('#search', q);
    await page.waitForSelector(sel);
    await page.click(sel);
  }
  await page.waitForFunction(() => document.querySelector('#chart')?.dataset.series === '3');
  const axes = await page.$$eval('#chart .u-axis', (a) => a.length);
  check('compare: two value axes', axes === 3, axes);
  const heads = await page.$$eval('#table thead th', (t) => t.map((x) => x.textContent));
  check('compare: a column per series', heads.join('|') === 'Period|MSFT (USD)|IBM (USD)|Fossil Fuels (thousand MWh)', heads);
  const compareLegend = await page.$eval('#chart .u-legend', (e) => e.textContent);
  check('compare: legend names all three', ['MSFT', 'IBM', 'Fossil Fuels'].every((x) => compareLegend.includes(x)), compareLegend);
  const compareFormula = await page.$eval('#formula', (e) => e.textContent);
  check('compare: one formula for all', compareFormula === '=ES.Get("MSFT,IBM,Fossil Fuels","2005-01","2008-12","per=Q","agg=avg")', compareFormula);
  await page.screenshot({ path: `${artifacts}/ui-compare.png` });
  await page.click('#compare .chip[data-ref="iowa:Fossil Fuels"] .chip-x');
  await page.waitForFunction(() => document.querySelector('#chart')?.dataset.series === '2');

  // Keyboard: arrow down into the results, Enter opens; frequency and
  // aggregate go back to the series' own.
  await page.fill('#search', '');
  await page.locator('#search').pressSequentially('msft', { delay: 20 });
  await page.waitForSelector('.hit[data-id="MSFT"]');
  await page.focus('#search');
  await page.keyboard.press('ArrowDown');
  const focused = await page.evaluate(() => document.activeElement?.dataset?.id);
  check('arrow down focuses the first result', focused === 'MSFT', focused);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#chart')?.dataset.series === '2' && document.querySelector('#per')?.value === '');
  const perAgg = [await page.inputValue('#per'), await page.inputValue('#agg'), await page.inputValue('#from')];
  check('frequency, aggregate and range reset on open', perAgg.join('|') === '|last|', perAgg);

  // Live: a delta for MSFT on the server shows in the open chart and table.
  await page.click('#compare .chip .chip-x');
  await page.waitForFunction(() => document.querySelector('#chart')?.dataset.series === '1');
  const liveStart = Date.now();
  await page.evaluate(() => fetch('/__ingest').then((r) => { if (!r.ok) throw new Error('ingest ' + r.status); }));
  await page.waitForFunction(() => document.querySelector('#table tbody tr:first-child td:last-child')?.textContent === (31.25).toLocaleString(undefined, { minimumFractionDigits: 2 }), null, { timeout: 10000 });
  out.liveMs = Date.now() - liveStart;
  check('live update shown within 5 s', out.liveMs < 5000, out.liveMs);

  // Facets browse the store: with the search box empty, a facet value
  // lists its series (App.Browse, by id, with the count); the options are
  // the store's values with their series counts; two facets narrow.
  const hitIds = () => page.$$eval('.hit', (hs) => hs.map((x) => `${x.dataset.dataset}:${x.dataset.id}`).join(','));
  await page.fill('#search', '');
  await page.waitForFunction(() => document.querySelectorAll('.hit').length === 0);
  await page.waitForFunction(() => [...document.querySelectorAll('#facet-unit option')].some((o) => o.value === 'USD' && o.textContent.includes('(5)')));
  const unitOpts = await page.$$eval('#facet-unit option', (o) => o.map((x) => x.textContent));
  check('unit facet: store values with counts', unitOpts.join('|') === 'Unit: all|USD (5)|thousand MWh (3)', unitOpts);
  await page.selectOption('#facet-unit', 'USD');
  await page.waitForFunction(() => document.querySelectorAll('.hit').length === 5);
  const usd = await hitIds();
  check('browse by unit lists its series by id', usd === 'stocks:AAPL,stocks:AMZN,stocks:GOOG,stocks:IBM,stocks:MSFT', usd);
  const usdInfo = await page.$eval('#result-info', (e) => e.textContent);
  check('browse says how many match', usdInfo.startsWith('5 series'), usdInfo);
  await page.selectOption('#facet-source', 'vega-datasets');
  await page.waitForFunction(() => document.querySelector('#result-info')?.textContent.startsWith('5 series'));
  check('unit and its source: the same five', (await hitIds()) === usd, await hitIds());
  await page.selectOption('#facet-frequency', 'A');
  await page.waitForFunction(() => document.querySelector('#result-info')?.textContent === 'No series match.');
  check('USD and annual: none', (await hitIds()) === '', await hitIds());
  await page.selectOption('#facet-unit', '');
  await page.selectOption('#facet-source', '');
  await page.waitForFunction(() => document.querySelectorAll('.hit').length === 3);
  const annual = await hitIds();
  check('annual alone: the three of iowa', annual.split(',').every((x) => x.startsWith('iowa:')), annual);
  await page.selectOption('#facet-dataset', 'stocks');
  await page.waitForFunction(() => document.querySelector('#result-info')?.textContent === 'No series match.');
  await page.selectOption('#facet-frequency', '');
  await page.waitForFunction(() => document.querySelectorAll('.hit').length === 5);
  await page.selectOption('#facet-dataset', '');
  await page.waitForFunction(() => document.querySelectorAll('.hit').length === 0);

  // Facets: a search across datasets narrows to one.
  await page.fill('#search', '');
  await page.locator('#search').pressSequentially('e', { delay: 20 });
  await page.waitForSelector('#facet-dataset');
  const facetVals = await page.$$eval('#facet-dataset option', (o) => o.map((x) => x.value).filter(Boolean));
  check('dataset facet offers several', facetVals.length >= 2, facetVals);
  await page.selectOption('#facet-dataset', facetVals[0]);
  await page.waitForFunction((ds) => [...document.querySelectorAll('.hit')].length > 0 && [...document.querySelectorAll('.hit')].every((x) => x.dataset.dataset === ds), facetVals[0]);

  // Export: MSFT from the Explorer, IBM from the picker.
  await page.click('#tab-export');
  await page.waitForSelector('#export-series .chip');
  await page.locator('#export-search').pressSequentially('IBM', { delay: 40 });
  await page.click('.suggestion:has-text("IBM")');
  const chips = await page.$$eval('#export-series .chip', (c) => c.map((x) => x.firstChild.textContent));
  check('export series picked', chips.join(',') === 'MSFT,IBM', chips);
  await page.fill('#export-from', '2005');
  await page.fill('#export-to', '2006');
  await page.fill('#export-path', exportPath);
  await page.click('#export-go');
  await page.waitForSelector('#export-result .ok-box, #export-result .error');
  const result = await page.$eval('#export-result', (e) => e.textContent);
  check('export finished', result.includes('Saved') && result.includes('2 series × 24 dates'), result);
  const bar = await page.$eval('#export-bar .bar-fill', (e) => e.style.width);
  check('export progress bar full', bar === '100%', bar);
  const events = await page.evaluate(() => window.__events.filter((e) => e.name === 'export:progress').length);
  check('export progress events', events > 0, events);
  await page.click('#export-open-folder');
  out.export = result;
  await page.screenshot({ path: `${artifacts}/ui-export.png` });

  // The other views render.
  // Sync: the three datasets live from the test's server.
  await page.click('#tab-sync');
  await page.waitForFunction(() => [...document.querySelectorAll('#view-sync tbody tr')].filter((r) => r.textContent.includes('live')).length === 3, null, { timeout: 60000 });
  const online = await page.$eval('#view-sync .panel', (e) => e.textContent);
  check('sync online', online.includes('Online'), online);
  if (serverInUse) {
    // The app's server list names a dead server first (app/browser_test.go).
    const inUse = await page.$eval('#sync-server', (e) => e.textContent);
    check('sync shows the server in use', inUse === serverInUse, inUse);
    const note = await page.$eval('#sync-servers', (e) => e.textContent);
    check('sync shows the list and the failovers', /1 of 2 servers; [1-9]\d* failovers?\)/.test(note), note);
  }
  await page.screenshot({ path: `${artifacts}/ui-sync.png` });
  await page.click('#tab-excel');
  await page.waitForSelector('#manifest-url');
  const manifest = await page.$eval('#manifest-url', (e) => e.textContent);
  check('excel shows the manifest URL', /^https:\/\/127\.0\.0\.1:\d+\/addin\/manifest\.xml$/.test(manifest), manifest);
  await page.screenshot({ path: `${artifacts}/ui-excel.png` });
  await page.click('#tab-settings');
  await page.waitForSelector('#set-server');
  await page.fill('#set-server', 'not a url');
  await page.click('#save-settings');
  await page.waitForSelector('#view-settings .error');
  const err = await page.$eval('#view-settings .error', (e) => e.textContent);
  check('settings errors are words', err.includes('want a URL'), err);

  check('no page errors', errors.length === 0, errors);
  out.ok = true;
} catch (e) {
  out.ok = false;
  out.error = String(e && e.message ? e.message : e);
  out.pageErrors = errors;
  code = 1;
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
process.exit(code);
