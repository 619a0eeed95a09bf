// Runs functions.js, with the CustomFunctions stand-ins of stub.js, against
// a real bridge over real HTTPS. Started by the Go test TestNodeAddin
// (functions/bridge), which sets:
//   ES_BRIDGE_URL, ES_BRIDGE_TOKEN   the bridge and its token
//   NODE_EXTRA_CA_CERTS               the bridge's CA, so TLS verifies for real
//   ES_TEST_CONTROL                   a plain-HTTP helper: POST /apply?series=&value= applies an update
"use strict";
const test = require("node:test");
const assert = require("node:assert");

const url = process.env.ES_BRIDGE_URL;
const token = process.env.ES_BRIDGE_TOKEN;
const control = process.env.ES_TEST_CONTROL;
if (!url || !token) {
  throw new Error("run through the Go test TestNodeAddin (needs ES_BRIDGE_URL and ES_BRIDGE_TOKEN)");
}
globalThis.ES_BRIDGE_URL = url;
globalThis.ES_BRIDGE_TOKEN = token;

// Count the requests functions.js makes.
let fetches = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = function (u, init) {
  fetches++;
  return realFetch(u, init);
};

const esTest = require("../stub.js");
const fns = require("../functions.js");

test.after(() => {
  if (fns.esLive.ws) {
    fns.esLive.ws.close();
  }
});

const E = (code, message) => ({ error: { code, message } });

test("ES.GET returns the sample prices (MSFT Jan 2000 = 39.81)", async () => {
  const [r] = await esTest.run([{ fn: "GET", args: [[["MSFT"]], "2000-01-01", "2000-03-31"] }]);
  assert.deepStrictEqual(r, { value: [[36526, 39.81], [36557, 36.35], [36586, 43.22]] });
});

test("calls made in one tick go out as one request", async () => {
  const before = fetches;
  const calls = [];
  for (let i = 0; i < 50; i++) {
    calls.push({ fn: "LATEST", args: [[["MSFT"]]] });
  }
  calls.push({ fn: "INFO", args: [[["Renewables"]], "unit"] });
  const res = await esTest.run(calls);
  assert.strictEqual(fetches - before, 1);
  assert.deepStrictEqual(res[0], { value: [[28.8]] });
  assert.deepStrictEqual(res[50], { value: [["thousand MWh"]] });
});

test("ranges, repeating options and empty cells", async () => {
  const res = await esTest.run([
    { fn: "GET", args: [[["MSFT"], ["GOOG"]], "2004-06", "2004-09", [[["headers=y"]]]] },
    { fn: "GET", args: [[["MSFT"]], "2000", "2001", [[["per=A"]], [["agg=avg"]]]] },
    { fn: "GET", args: [[["MSFT"]], null, null, [[["per=Q"], ["agg=max"]]]] },
  ]);
  assert.deepStrictEqual(res[0].value[0], ["Date", "MSFT", "GOOG"]);
  assert.deepStrictEqual(res[0].value[1], [38139, 23.44, ""]); // no GOOG point: an empty cell
  assert.deepStrictEqual(res[1], { value: [[36526, 29.67333333333332], [36892, 25.3475]] });
  assert.deepStrictEqual(res[2].value[0], [36526, 43.22]);
});

test("errors become CustomFunctions.Error with the message", async () => {
  const res = await esTest.run([
    { fn: "GET", args: [[["NOPE"]]] },
    { fn: "GET", args: [[["MSFT"]], "2000-13-45"] },
    { fn: "GET", args: [[["MSFT,NOPE"]], "2004-07", "2004-07"] },
    { fn: "GET", args: [[["SEA.temperature"]], null, null, [[["per=D"]], [["agg=median"]]]] },
    { fn: "SEARCH", args: ["zzzz"] },
  ]);
  assert.deepStrictEqual(res[0], E("#N/A", 'series "NOPE" not found'));
  assert.deepStrictEqual(res[1], E("#VALUE!", 'start: cannot read date "2000-13-45"'));
  assert.deepStrictEqual(res[2], { value: [[38169, 23.38, E("#N/A", 'series "NOPE" not found')]] });
  assert.deepStrictEqual(res[3], E("#VALUE!", "option agg=median: want last, first, avg, sum, min or max"));
  assert.deepStrictEqual(res[4], E("#N/A", 'no series match "zzzz"'));
});

test("a wrong token or a missing bridge is #N/A with a reason", async () => {
  globalThis.ES_BRIDGE_TOKEN = "wrong";
  let [r] = await esTest.run([{ fn: "LATEST", args: [[["MSFT"]]] }]);
  assert.strictEqual(r.error.code, "#N/A");
  assert.match(r.error.message, /401.*wrong token/);
  globalThis.ES_BRIDGE_TOKEN = token;
  globalThis.ES_BRIDGE_URL = "https://127.0.0.1:1";
  [r] = await esTest.run([{ fn: "LATEST", args: [[["MSFT"]]] }]);
  assert.strictEqual(r.error.code, "#N/A");
  assert.match(r.error.message, /Cannot reach the EnergyScope companion/);
  globalThis.ES_BRIDGE_URL = url;
});

test("ES.LIVE streams updates over the websocket and unsubscribes on cancel", { skip: typeof WebSocket === "undefined" && "no WebSocket in this node" }, async () => {
  const s = esTest.stream("LIVE", [[["MSFT"]]]);
  const waitFor = (n) =>
    new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("timeout; got " + JSON.stringify(s.results))), 10000);
      const check = () => {
        if (s.results.length >= n) {
          clearTimeout(t);
          resolve(s.results);
        }
      };
      s.onResult = check;
      check();
    });
  await waitFor(1);
  assert.deepStrictEqual(s.results[0], { value: [[28.8]] });
  const resp = await realFetch(control + "/apply?series=MSFT&value=99.5", { method: "POST" });
  assert.strictEqual(resp.status, 200);
  await waitFor(2);
  assert.deepStrictEqual(s.results[1], { value: [[99.5]] });
  s.cancel();
  assert.deepStrictEqual(Object.keys(fns.esLive.subs), []);
  // An unknown series streams its error.
  const bad = await esTest.live("LIVE", [[["NOPE"]]], 1);
  assert.deepStrictEqual(bad[0], E("#N/A", 'series "NOPE" not found'));
});

// Stand-ins for office.js's Office and Excel namespaces, enough for
// esRefreshOnOpen: a workbook with or without the custom property es export
// writes into a --formulas workbook.
function fakeOffice(props) {
  const calls = { calculate: [], startup: [] };
  const Excel = {
    CalculationType: { full: "Full", recalculate: "Recalculate" },
    run(fn) {
      const ctx = {
        workbook: {
          properties: {
            custom: {
              getItemOrNullObject(key) {
                const item = { isNullObject: !(key in props), value: undefined, load() {} };
                return item;
              },
            },
          },
          application: { calculate: (t) => calls.calculate.push(t) },
        },
        sync() {
          return Promise.resolve();
        },
      };
      // Values appear at sync, as in office.js.
      const get = ctx.workbook.properties.custom.getItemOrNullObject;
      ctx.workbook.properties.custom.getItemOrNullObject = (key) => {
        const item = get(key);
        item.load = () => {
          item.value = props[key];
        };
        return item;
      };
      return Promise.resolve().then(() => fn(ctx));
    },
  };
  const Office = {
    StartupBehavior: { load: "Load", none: "None" },
    addin: { setStartupBehavior: (b) => (calls.startup.push(b), Promise.resolve()) },
  };
  return { Office, Excel, calls };
}

test("a --formulas workbook is recalculated in full once the add-in runs in it, and loads the add-in on its next open", async () => {
  const { Office, Excel, calls } = fakeOffice({ EnergyScopeRefresh: "formulas" });
  assert.strictEqual(await fns.esRefreshOnOpen(Office, Excel), true);
  assert.deepStrictEqual(calls.calculate, ["Full"]);
  assert.deepStrictEqual(calls.startup, ["Load"]);
});

test("any other workbook is left alone", async () => {
  const { Office, Excel, calls } = fakeOffice({});
  assert.strictEqual(await fns.esRefreshOnOpen(Office, Excel), false);
  assert.deepStrictEqual(calls.calculate, []);
  assert.deepStrictEqual(calls.startup, []);
});

test("outside Excel (no Excel namespace) nothing happens", async () => {
  assert.strictEqual(await fns.esRefreshOnOpen(undefined, undefined), false);
});
