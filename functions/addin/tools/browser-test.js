// The end-to-end test in headless Chromium: opens the task pane served by a
// real bridge in test mode (taskpane.html?test=1: stub.js stands in for
// Office), evaluates formulas through the add-in's own code, streams
// ES.LIVE through an update, drives the function builder, and prints what
// it saw as JSON for the Go test TestBrowserAddin to check. Environment:
//   ES_BRIDGE_URL     the bridge
//   ES_SPKI           base64 SHA-256 of the bridge certificate's public key
//                     (Chromium then accepts exactly that certificate)
//   ES_TEST_CONTROL   plain-HTTP helper that applies updates (optional:
//                     without it ES.LIVE is not streamed)
//   CHROMIUM          the browser (default /usr/bin/chromium)
//   ES_SCREENSHOT     optional PNG path
"use strict";
const { chromium } = require("playwright-core");

async function main() {
  const url = process.env.ES_BRIDGE_URL;
  const control = process.env.ES_TEST_CONTROL;
  const userDir = require("fs").mkdtempSync(require("path").join(require("os").tmpdir(), "es-chromium-"));
  const ctx = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--ignore-certificate-errors-spki-list=" + process.env.ES_SPKI,
    ],
  });
  const errors = [];
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    // Nothing may leave the machine: only the bridge is reachable.
    await page.route((u) => !u.href.startsWith(url), (r) => r.abort());
    page.on("pageerror", (e) => errors.push(String(e)));
    // The Authorization header of every API call: the bridge wants the token
    // on each, and the page must have found it by itself.
    const auth = [];
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith("/v1/")) auth.push(u.pathname + " " + (r.headers()["authorization"] || ""));
    });
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    await page.goto(url + "/addin/taskpane.html?test=1");
    await page.waitForFunction(() => window.esTest && window.esTaskpane && window.CustomFunctions.registry.GET);
    await page.waitForSelector("#conn.ok", { timeout: 15000 });

    const calls = JSON.parse(process.env.ES_CALLS);
    const results = await page.evaluate((c) => window.esTest.run(c), calls);

    // ES.LIVE streams an update the control server applies (skipped
    // without ES_TEST_CONTROL: a run that only evaluates ES_CALLS).
    let live = [];
    if (control) {
      await page.evaluate(() => {
        window.__live = window.esTest.stream("LIVE", [[["MSFT"]]]);
      });
      await page.waitForFunction(() => window.__live.results.length >= 1, null, { timeout: 10000 });
      const resp = await fetch(control + "/apply?series=MSFT&value=77.25", { method: "POST" });
      if (resp.status !== 200) throw new Error("control: " + resp.status);
      await page.waitForFunction(() => window.__live.results.length >= 2, null, { timeout: 10000 });
      live = await page.evaluate(() => window.__live.results);
    }

    await page.fill("#q", "MS");
    await page.click("#search");
    await page.waitForSelector("#hits li .id");
    await page.click("#hits li");
    await page.fill("#start", "2000");
    await page.selectOption("#per", "M");
    await page.selectOption("#agg", "avg");
    await page.selectOption("#chg", "yoy=pct");
    const formula = await page.inputValue("#formula");
    const datasets = await page.$$eval("#datasets tbody tr", (rows) => rows.map((r) => r.dataset.name));
    const conn = await page.textContent("#conn-text");
    if (process.env.ES_SCREENSHOT) {
      await page.screenshot({ path: process.env.ES_SCREENSHOT, fullPage: true });
    }
    process.stdout.write(JSON.stringify({ results, live, formula, datasets, conn, errors, auth }) + "\n");
  } finally {
    await ctx.close();
    require("fs").rmSync(userDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
