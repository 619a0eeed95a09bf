/*
 * EnergyScope custom functions for Excel: ES.GET, ES.LATEST, ES.INFO,
 * ES.SEARCH and ES.LIVE.
 *
 * Plain browser JavaScript, no build step: the bridge serves this file as is
 * from https://127.0.0.1:PORT/addin/functions.js and the add-in's shared
 * runtime (taskpane.html) loads it. functions.json is generated from the
 * JSDoc below by custom-functions-metadata (`npm run metadata`); a Go test
 * fails when it is out of date.
 *
 * The functions give no meaning to their arguments: they queue each call,
 * send every call queued in one tick as one POST /v1/calc, and turn the
 * answers into cells. The meaning lives in Go (package functions; the user
 * reference is docs/functions.md).
 *
 * Every request carries the bridge's token. In Excel it comes from the page
 * this file runs in: the bridge writes it into taskpane.html's
 * <meta name="es-bridge-token"> when it serves the page (only to processes of
 * its own OS user, docs/excel.md), so the user does nothing. Outside Excel
 * (node tests) set globalThis.ES_BRIDGE_URL and globalThis.ES_BRIDGE_TOKEN
 * before loading this file; a CustomFunctions stub must exist (stub.js).
 */
/* global CustomFunctions, WebSocket, fetch, setTimeout, clearTimeout, globalThis, module */

var ES_MAX_BATCH = 5000; // calls per request; the bridge takes up to 100,000
var ES_RETRY_MS = [250, 500, 1000, 2000, 5000, 10000, 30000];

/** The token the bridge wrote into the page, or "". */
function esPageToken(g) {
  var d = g.document;
  var m = d && d.querySelector && d.querySelector('meta[name="es-bridge-token"]');
  return (m && m.getAttribute("content")) || "";
}

/** The bridge's origin and token, read when a request is made. */
function esConfig() {
  var g = typeof globalThis !== "undefined" ? globalThis : self;
  var base = g.ES_BRIDGE_URL || (g.location && g.location.origin) || "https://127.0.0.1:17825";
  return { base: String(base).replace(/\/+$/, ""), token: g.ES_BRIDGE_TOKEN || esPageToken(g) };
}

/** CustomFunctions.ErrorCode for a bridge error code ("#N/A", ...). */
function esErrorCode(code) {
  var E = CustomFunctions.ErrorCode;
  switch (code) {
    case "#VALUE!":
      return E.invalidValue;
    case "#NUM!":
      return E.invalidNumber;
    case "#DIV/0!":
      return E.divisionByZero;
    case "#REF!":
      return E.invalidReference;
    case "#NULL!":
      return E.nullReference;
    default:
      return E.notAvailable;
  }
}

function esError(e) {
  return new CustomFunctions.Error(esErrorCode(e && e.code), (e && e.message) || "EnergyScope error");
}

/**
 * Cells as Excel takes them: error objects become CustomFunctions.Error;
 * an empty cell (null) becomes "" so that it shows empty, not 0.
 */
function esCells(value) {
  var out = new Array(value.length);
  for (var r = 0; r < value.length; r++) {
    var row = value[r];
    var o = new Array(row.length);
    for (var c = 0; c < row.length; c++) {
      var v = row[c];
      if (v === null || v === undefined) {
        o[c] = "";
      } else if (typeof v === "object") {
        o[c] = esError(v.error);
      } else {
        o[c] = v;
      }
    }
    out[r] = o;
  }
  return out;
}

// The queue of calls waiting for the next flush.
var esQueue = [];
var esFlushTimer = null;

/** Queues one call; every call queued in the same tick goes in one request. */
function esCall(fn, args) {
  return new Promise(function (resolve, reject) {
    esQueue.push({ fn: fn, args: args, resolve: resolve, reject: reject });
    if (esFlushTimer === null) {
      esFlushTimer = setTimeout(esFlush, 0);
    }
  });
}

function esFlush() {
  esFlushTimer = null;
  var batch = esQueue;
  esQueue = [];
  for (var i = 0; i < batch.length; i += ES_MAX_BATCH) {
    esSend(batch.slice(i, i + ES_MAX_BATCH));
  }
}

function esHeaders(cfg) {
  var h = { "Content-Type": "application/json" };
  if (cfg.token) {
    h.Authorization = "Bearer " + cfg.token;
  }
  return h;
}

function esFailAll(batch, code, message) {
  var err = new CustomFunctions.Error(esErrorCode(code), message);
  for (var i = 0; i < batch.length; i++) {
    batch[i].reject(err);
  }
}

/** Sends one batch and settles its promises. */
function esSend(batch) {
  var cfg = esConfig();
  var calls = new Array(batch.length);
  for (var i = 0; i < batch.length; i++) {
    calls[i] = { fn: batch[i].fn, args: batch[i].args };
  }
  var body = JSON.stringify({ calls: calls });
  return fetch(cfg.base + "/v1/calc", {
    method: "POST",
    headers: esHeaders(cfg),
    body: body,
    // Chrome's Local Network Access: the bridge is on loopback.
    targetAddressSpace: "loopback",
  })
    .then(
      function (resp) {
        return resp.text().then(function (text) {
          var data = null;
          try {
            data = JSON.parse(text);
          } catch (e) {
            data = null;
          }
          if (!resp.ok || !data || !Array.isArray(data.results)) {
            var msg = data && data.error && data.error.message;
            if (resp.status === 413 && batch.length > 1) {
              // Too large for one request: halve it and try again.
              var mid = Math.floor(batch.length / 2);
              esSend(batch.slice(0, mid));
              esSend(batch.slice(mid));
              return;
            }
            esFailAll(batch, (data && data.error && data.error.code) || "#N/A",
              "EnergyScope bridge answered " + resp.status + (msg ? ": " + msg : ""));
            return;
          }
          for (var i = 0; i < batch.length; i++) {
            var r = data.results[i];
            if (!r) {
              batch[i].reject(new CustomFunctions.Error(CustomFunctions.ErrorCode.notAvailable, "no answer from the bridge"));
            } else if (r.error) {
              batch[i].reject(esError(r.error));
            } else {
              batch[i].resolve(esCells(r.value));
            }
          }
        });
      },
      function (e) {
        esFailAll(batch, "#N/A", "Cannot reach the EnergyScope companion at " + cfg.base +
          ": is it running (es companion) and its certificate trusted (es trust)? " + (e && e.message ? e.message : ""));
      }
    );
}

/** The arguments as sent: undefined (an omitted argument) becomes null. */
function esArgs(list) {
  var out = new Array(list.length);
  for (var i = 0; i < list.length; i++) {
    out[i] = list[i] === undefined ? null : list[i];
  }
  return out;
}

/**
 * A time series, or several aligned on one date column: dates (Excel serials) and values that spill.
 * @customfunction GET
 * @param {any[][]} series Series id, a comma-separated list of ids, or a range of ids.
 * @param {any} [start] First date, inclusive: a date cell, 2020-01-15, 2020-03, 2020, -1Y, ytd ... Empty: from the first point.
 * @param {any} [end] Last date, inclusive (covers the whole day, month or year it names). Empty: to the latest point.
 * @param {any[][][]} [options] key=value options: per=D|W|M|Q|A, agg=last|first|avg|sum|min|max, days=all|weekdays, fill=none|prev|na|zero, chg=diff|pct|log, yoy=diff|pct, ma=N, rebase=X, scale=X, order=asc|desc, headers=id|name|unit|all, dates=n, transpose=y, last=N, asof=2026-10-01|time|snapshot id|tag (a published vintage).
 * @returns {any[][]} Rows of [date, value, ...].
 */
function esGet(series, start, end, options) {
  var args = [series, start, end];
  if (options) {
    for (var i = 0; i < options.length; i++) {
      args.push(options[i]);
    }
  }
  return esCall("ES.Get", esArgs(args));
}

/**
 * The latest value of a series (or its date, or both).
 * @customfunction LATEST
 * @param {any[][]} series Series id, a comma-separated list of ids, or a range of ids.
 * @param {any} [field] value (default), date, or both.
 * @returns {any[][]} The latest value(s).
 */
function esLatest(series, field) {
  return esCall("ES.Latest", esArgs([series, field]));
}

/**
 * What a series is: name, unit, frequency, source, first and last date, count, latest value.
 * @customfunction INFO
 * @param {any[][]} series Series id, a comma-separated list of ids, or a range of ids.
 * @param {any} [field] id, dataset, name, unit, frequency, source, first, last, count, latest or updated. Empty: a table of every field.
 * @returns {any[][]} The field(s).
 */
function esInfo(series, field) {
  return esCall("ES.Info", esArgs([series, field]));
}

/**
 * Finds series by id or name: rows of [id, name], best match first.
 * @customfunction SEARCH
 * @param {any} query Words to look for in ids and names.
 * @param {any} [limit] The most rows to return, 1 to 1000 (default 20).
 * @returns {any[][]} Rows of [id, name].
 */
function esSearch(query, limit) {
  return esCall("ES.Search", esArgs([query, limit]));
}

/**
 * Every value one period of a series has had across the vintages the server keeps: rows of [vintage time, value], oldest first, under a header row.
 * @customfunction REVISIONS
 * @param {any[][]} series One series id.
 * @param {any} period The period: a date cell, 2026-09, 2026-09-15 ... (taken to the start of its bucket in the series' frequency).
 * @returns {any[][]} Rows of [vintage time, value].
 */
function esRevisions(series, period) {
  return esCall("ES.Revisions", esArgs([series, period]));
}

// ---- ES.LIVE: one websocket per runtime, shared by every live cell. ----

var esLive = {
  ws: null,
  open: false,
  subs: {}, // series id -> { listeners: [fn], last: message }
  retry: 0,
  timer: null,
};

function esLiveURL(cfg) {
  return cfg.base.replace(/^http/, "ws") + "/v1/live";
}

function esLiveSend(msg) {
  if (esLive.ws && esLive.open) {
    esLive.ws.send(JSON.stringify(msg));
  }
}

function esLiveConnect() {
  if (esLive.ws || typeof WebSocket === "undefined") {
    return;
  }
  var cfg = esConfig();
  // The token goes as a subprotocol, since WebSocket cannot set headers.
  var protocols = ["es-live"];
  if (cfg.token) {
    protocols.push("bearer." + cfg.token);
  }
  var ws;
  try {
    ws = new WebSocket(esLiveURL(cfg), protocols);
  } catch (e) {
    esLiveRetry();
    return;
  }
  esLive.ws = ws;
  ws.onopen = function () {
    esLive.open = true;
    esLive.retry = 0;
    var ids = Object.keys(esLive.subs);
    if (ids.length) {
      esLiveSend({ subscribe: ids });
    }
  };
  ws.onmessage = function (ev) {
    var m;
    try {
      m = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    var s = m && esLive.subs[m.series];
    if (!s) {
      return;
    }
    s.last = m;
    s.listeners.slice().forEach(function (fn) {
      fn();
    });
  };
  ws.onclose = function () {
    esLive.ws = null;
    esLive.open = false;
    var ids = Object.keys(esLive.subs);
    ids.forEach(function (id) {
      esLive.subs[id].last = { series: id, error: { code: "#N/A", message: "connection to the EnergyScope companion lost; reconnecting" } };
      esLive.subs[id].listeners.slice().forEach(function (fn) {
        fn();
      });
    });
    if (ids.length) {
      esLiveRetry();
    }
  };
  ws.onerror = function () {
    // onclose follows.
  };
}

/** Closes the websocket quietly: nothing is subscribed any more. */
function esLiveDisconnect() {
  var ws = esLive.ws;
  esLive.ws = null;
  esLive.open = false;
  if (ws) {
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
    ws.close();
  }
}

function esLiveRetry() {
  if (esLive.timer !== null) {
    return;
  }
  var base = ES_RETRY_MS[Math.min(esLive.retry, ES_RETRY_MS.length - 1)];
  esLive.retry++;
  esLive.timer = setTimeout(function () {
    esLive.timer = null;
    esLiveConnect();
  }, Math.random() * base);
}

/** Subscribes fn to id; returns the function that unsubscribes. */
function esLiveSubscribe(id, fn) {
  var s = esLive.subs[id];
  if (!s) {
    s = esLive.subs[id] = { listeners: [], last: null };
    esLiveSend({ subscribe: [id] });
  } else if (s.last) {
    setTimeout(fn, 0);
  }
  s.listeners.push(fn);
  esLiveConnect();
  return function () {
    var i = s.listeners.indexOf(fn);
    if (i >= 0) {
      s.listeners.splice(i, 1);
    }
    if (s.listeners.length === 0 && esLive.subs[id] === s) {
      delete esLive.subs[id];
      esLiveSend({ unsubscribe: [id] });
      if (Object.keys(esLive.subs).length === 0) {
        esLiveDisconnect();
      }
    }
  };
}

/** The ids of a series argument, in the shape of the argument. */
function esLiveIDs(series) {
  if (!Array.isArray(series)) {
    series = [[series]];
  }
  if (series.length === 1 && series[0].length === 1 && typeof series[0][0] === "string") {
    var parts = series[0][0].split(",").map(function (s) {
      return s.trim();
    }).filter(function (s) {
      return s !== "";
    });
    return [parts];
  }
  return series.map(function (row) {
    return row.map(function (c) {
      return c === null || c === undefined ? "" : String(c).trim();
    });
  });
}

/**
 * The latest value of a series, updated in the cell as new data arrives.
 * @customfunction LIVE
 * @param {any[][]} series Series id, a comma-separated list of ids, or a range of ids.
 * @param {CustomFunctions.StreamingInvocation<any[][]>} invocation Streaming invocation.
 * @returns {any[][]} The latest value(s), kept up to date.
 */
function esLiveFn(series, invocation) {
  var grid = esLiveIDs(series);
  var ids = [];
  grid.forEach(function (row) {
    row.forEach(function (id) {
      if (id !== "" && ids.indexOf(id) < 0) {
        ids.push(id);
      }
    });
  });
  if (ids.length === 0) {
    invocation.setResult(new CustomFunctions.Error(CustomFunctions.ErrorCode.invalidValue, "series: empty; want a series id"));
    return;
  }
  function update() {
    var allKnown = true;
    var out = grid.map(function (row) {
      return row.map(function (id) {
        if (id === "") {
          return "";
        }
        var m = esLive.subs[id] && esLive.subs[id].last;
        if (!m) {
          allKnown = false;
          return "";
        }
        if (m.error) {
          return esError(m.error);
        }
        return m.value === null || m.value === undefined ? "" : m.value;
      });
    });
    if (!allKnown) {
      return;
    }
    if (out.length === 1 && out[0].length === 1 && out[0][0] instanceof CustomFunctions.Error) {
      invocation.setResult(out[0][0]);
      return;
    }
    invocation.setResult(out);
  }
  var cancels = ids.map(function (id) {
    return esLiveSubscribe(id, update);
  });
  invocation.onCanceled = function () {
    cancels.forEach(function (c) {
      c();
    });
  };
}

// The custom document property es export writes into a --formulas workbook.
var REFRESH_PROPERTY = "EnergyScopeRefresh";

/**
 * Refreshes a workbook exported with live formulas (es export --formulas) when
 * the add-in runs in it. Such a workbook opens on the values saved at export,
 * with no forced recalculation, so that it reads the same without the add-in;
 * with the add-in, this recalculates it in full once per session and asks
 * Office to load the add-in whenever this document opens, so the next open
 * refreshes without the task pane. Any other workbook is left alone.
 * office and excel are the Office and Excel namespaces of office.js (taken as
 * arguments so the node test can run it against stand-ins). Resolves to true
 * when it refreshed.
 */
function esRefreshOnOpen(office, excel) {
  if (!office || !excel || !excel.run) {
    return Promise.resolve(false);
  }
  return excel
    .run(function (ctx) {
      var prop = ctx.workbook.properties.custom.getItemOrNullObject(REFRESH_PROPERTY);
      prop.load("value");
      return ctx.sync().then(function () {
        if (prop.isNullObject || !prop.value) {
          return false;
        }
        ctx.workbook.application.calculate(excel.CalculationType.full);
        return ctx.sync().then(function () {
          return true;
        });
      });
    })
    .then(function (refreshed) {
      if (refreshed && office.addin && office.addin.setStartupBehavior) {
        return Promise.resolve(office.addin.setStartupBehavior(office.StartupBehavior.load)).then(function () {
          return true;
        });
      }
      return refreshed;
    })
    .catch(function () {
      // An older Excel without custom properties or calculate: nothing to do;
      // Ctrl+Alt+F9 still refreshes (the Info sheet says so).
      return false;
    });
}

if (typeof CustomFunctions !== "undefined" && CustomFunctions.associate) {
  CustomFunctions.associate("GET", esGet);
  CustomFunctions.associate("LATEST", esLatest);
  CustomFunctions.associate("INFO", esInfo);
  CustomFunctions.associate("SEARCH", esSearch);
  CustomFunctions.associate("REVISIONS", esRevisions);
  CustomFunctions.associate("LIVE", esLiveFn);
}

if (typeof module !== "undefined" && module.exports) {
  module.exports = { esGet: esGet, esLatest: esLatest, esInfo: esInfo, esSearch: esSearch, esRevisions: esRevisions, esLiveFn: esLiveFn, esLive: esLive, esCall: esCall, esRefreshOnOpen: esRefreshOnOpen };
}
