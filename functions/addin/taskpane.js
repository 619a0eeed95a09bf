/*
 * The task pane: connection status, how fresh the data is (GET /v1/status),
 * and a function builder that writes an ES.* formula into the selected cell.
 * It shares the runtime (and so esCall's batching) with functions.js.
 */
/* global Office, Excel, esConfig, esCall, document, window, navigator, fetch, setTimeout */
(function () {
  "use strict";

  var $ = function (id) {
    return document.getElementById(id);
  };
  var state = { picked: [], status: null, connected: null };

  // ---- status ----

  function age(iso) {
    if (!iso) {
      return "";
    }
    var t = Date.parse(iso);
    if (isNaN(t) || t <= 0) {
      return "";
    }
    var s = Math.max(0, (Date.now() - t) / 1000);
    if (s < 90) {
      return Math.round(s) + " s ago";
    }
    if (s < 5400) {
      return Math.round(s / 60) + " min ago";
    }
    if (s < 172800) {
      return Math.round(s / 3600) + " h ago";
    }
    return Math.round(s / 86400) + " days ago";
  }

  function setConn(ok, text) {
    state.connected = ok;
    var el = $("conn");
    el.className = "conn " + (ok ? "ok" : "down");
    $("conn-text").textContent = text;
  }

  function cell(text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) {
      td.className = cls;
    }
    return td;
  }

  function renderStatus(st) {
    var body = $("datasets").tBodies[0];
    body.textContent = "";
    if (!st.datasets || st.datasets.length === 0) {
      var tr = document.createElement("tr");
      tr.appendChild(cell("no datasets in this companion's home", "muted"));
      tr.firstChild.colSpan = 4;
      body.appendChild(tr);
      return;
    }
    st.datasets.forEach(function (d) {
      var tr = document.createElement("tr");
      tr.dataset.name = d.name;
      tr.appendChild(cell(d.name));
      var snapAge = age(d.snapshot_created);
      var old = Date.now() - Date.parse(d.snapshot_created) > 7 * 86400 * 1000 && !d.last_sync;
      tr.appendChild(cell(snapAge + (d.rows ? " · " + d.rows.toLocaleString() + " rows" : ""), old ? "stale" : ""));
      tr.appendChild(cell(d.last_sync ? age(d.last_sync) + " (seq " + d.seq + ")" : d.server ? "never" : "offline"));
      tr.appendChild(cell(d.pending_rows ? String(d.pending_rows) : "0"));
      body.appendChild(tr);
    });
  }

  function pollStatus() {
    var cfg = esConfig();
    var headers = cfg.token ? { Authorization: "Bearer " + cfg.token } : {};
    return fetch(cfg.base + "/v1/status", { headers: headers, targetAddressSpace: "loopback", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("status " + r.status);
        }
        return r.json();
      })
      .then(function (st) {
        state.status = st;
        setConn(true, "connected");
        renderStatus(st);
      })
      .catch(function (e) {
        state.status = null;
        setConn(false, "companion not reachable");
        $("conn").title = String(e && e.message);
      });
  }

  // ---- function builder ----

  function quote(s) {
    return '"' + String(s).replace(/"/g, '""') + '"';
  }

  // formula builds the formula text from the builder's fields.
  function formula(f) {
    var ids = f.series.join(",");
    var fn = f.fn || "GET";
    var args = [quote(ids)];
    if (fn === "GET") {
      if (f.start || f.end) {
        args.push(f.start ? quote(f.start) : "");
        if (f.end) {
          args.push(quote(f.end));
        }
      }
      var opts = [];
      if (f.per) {
        opts.push("per=" + f.per);
        if (f.agg) {
          opts.push("agg=" + f.agg);
        }
      }
      if (f.fill) {
        opts.push("fill=" + f.fill);
      }
      if (f.chg) {
        opts.push(f.chg);
      }
      if (f.order) {
        opts.push("order=" + f.order);
      }
      if (f.last) {
        opts.push("last=" + f.last);
      }
      if (f.headers) {
        opts.push("headers=y");
      }
      if (opts.length) {
        args.push(quote(opts.join(";")));
      }
    }
    return "=ES." + fn + "(" + args.join(",") + ")";
  }

  function fields() {
    return {
      series: state.picked,
      fn: $("fn").value,
      start: $("start").value.trim(),
      end: $("end").value.trim(),
      per: $("per").value,
      agg: $("agg").value,
      fill: $("fill").value,
      chg: $("chg").value,
      order: $("order").value,
      last: $("last").value.trim(),
      headers: $("headers").checked,
    };
  }

  function update() {
    var f = fields();
    $("formula").value = f.series.length ? formula(f) : "";
    $("insert").disabled = f.series.length === 0;
    var isGet = f.fn === "GET";
    ["start", "end", "per", "agg", "fill", "chg", "order", "last", "headers"].forEach(function (id) {
      $(id).disabled = !isGet;
    });
    $("agg").disabled = !isGet || !f.per;
  }

  function renderPicked() {
    var el = $("picked");
    el.textContent = "";
    state.picked.forEach(function (id) {
      var s = document.createElement("span");
      s.textContent = id + " ×";
      s.title = "remove";
      s.onclick = function () {
        state.picked = state.picked.filter(function (x) {
          return x !== id;
        });
        renderPicked();
      };
      el.appendChild(s);
    });
    update();
  }

  function pick(id) {
    if (state.picked.indexOf(id) < 0) {
      state.picked.push(id);
    }
    renderPicked();
  }

  function search() {
    var q = $("q").value.trim();
    var list = $("hits");
    list.textContent = "";
    if (!q) {
      return Promise.resolve([]);
    }
    return esCall("ES.Search", [q, 50]).then(
      function (rows) {
        rows.forEach(function (r) {
          var li = document.createElement("li");
          var id = document.createElement("span");
          id.className = "id";
          id.textContent = r[0];
          li.appendChild(id);
          li.appendChild(document.createTextNode(r[1] || ""));
          li.onclick = function () {
            pick(String(r[0]));
          };
          list.appendChild(li);
        });
        return rows;
      },
      function (e) {
        var li = document.createElement("li");
        li.className = "muted";
        li.textContent = (e && e.message) || "no match";
        list.appendChild(li);
        return [];
      }
    );
  }

  function insert() {
    var text = $("formula").value;
    var msg = $("insert-msg");
    if (!text) {
      return Promise.resolve(false);
    }
    if (typeof Excel !== "undefined" && Excel.run) {
      return Excel.run(function (ctx) {
        var r = ctx.workbook.getSelectedRange();
        r.formulas = [[text]];
        return ctx.sync();
      }).then(
        function () {
          msg.textContent = "inserted";
          return true;
        },
        function (e) {
          msg.textContent = "could not insert: " + e.message;
          return false;
        }
      );
    }
    // Outside Excel: copy the formula.
    if (navigator.clipboard && navigator.clipboard.writeText) {
      return navigator.clipboard.writeText(text).then(
        function () {
          msg.textContent = "copied (Excel not available)";
          return true;
        },
        function () {
          msg.textContent = "select and copy the formula";
          return false;
        }
      );
    }
    msg.textContent = "select and copy the formula";
    return Promise.resolve(false);
  }

  function init() {
    $("origin").textContent = esConfig().base;
    $("search").onclick = search;
    $("q").addEventListener("keydown", function (e) {
      if (e.key === "Enter") {
        search();
      }
    });
    ["fn", "start", "end", "per", "agg", "fill", "chg", "order", "last", "headers"].forEach(function (id) {
      $(id).addEventListener("input", update);
      $(id).addEventListener("change", update);
    });
    $("insert").onclick = insert;
    update();
    pollStatus();
    setInterval(pollStatus, 5000);
  }

  // For the browser test and for debugging from the console.
  window.esTaskpane = { state: state, formula: formula, pollStatus: pollStatus, search: search, pick: pick, fields: fields };

  if (typeof Office !== "undefined" && Office.onReady) {
    Office.onReady(function () {
      init();
      if (typeof Excel !== "undefined") {
        esRefreshOnOpen(Office, Excel);
      }
    });
  } else {
    init();
  }
})();
