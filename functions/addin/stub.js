/*
 * Stand-ins for Office's CustomFunctions runtime, for running the add-in
 * outside Excel: the node tests (require it before functions.js) and the
 * browser test page (taskpane.html?test=1). In Excel, office.js defines
 * CustomFunctions first and this file does nothing but define the test
 * harness, which nothing calls.
 *
 * esTest.run([{fn: "GET", args: [...]}, ...]) calls the registered
 * functions as Excel would (all in one tick, so they batch) and resolves to
 * plain JSON: {value: [[...]]} or {error: {code, message}}, cells that are
 * errors as {error: {code, message}}. esTest.live(fn, args, n) collects the
 * first n results a streaming function sets, then cancels it.
 */
/* global globalThis, module */
(function (g) {
  "use strict";
  if (typeof g.CustomFunctions === "undefined") {
    var ErrorCode = {
      invalidValue: "#VALUE!",
      notAvailable: "#N/A",
      divisionByZero: "#DIV/0!",
      invalidNumber: "#NUM!",
      nullReference: "#NULL!",
      invalidName: "#NAME?",
      invalidReference: "#REF!",
    };
    var CFError = function (code, message) {
      this.code = code;
      this.message = message;
      this.name = "CustomFunctions.Error";
    };
    CFError.prototype = Object.create(Error.prototype);
    CFError.prototype.constructor = CFError;
    g.CustomFunctions = {
      stub: true,
      Error: CFError,
      ErrorCode: ErrorCode,
      registry: {},
      associate: function (id, fn) {
        if (typeof id === "object") {
          Object.keys(id).forEach(function (k) {
            g.CustomFunctions.registry[k.toUpperCase()] = id[k];
          });
          return;
        }
        g.CustomFunctions.registry[String(id).toUpperCase()] = fn;
      },
    };
  }

  function plainCell(c) {
    if (c instanceof g.CustomFunctions.Error) {
      return { error: { code: c.code, message: c.message } };
    }
    return c;
  }

  function plain(v) {
    if (v instanceof g.CustomFunctions.Error) {
      return { error: { code: v.code, message: v.message } };
    }
    if (Array.isArray(v)) {
      return {
        value: v.map(function (row) {
          return row.map(plainCell);
        }),
      };
    }
    return { value: v };
  }

  function lookup(fn) {
    var f = g.CustomFunctions.registry && g.CustomFunctions.registry[String(fn).toUpperCase().replace(/^ES\./, "")];
    if (!f) {
      throw new Error("no custom function " + fn);
    }
    return f;
  }

  g.esTest = {
    // Calls every fn in the same tick, as Excel does when it recalculates.
    run: function (calls) {
      return Promise.all(
        calls.map(function (c) {
          var p;
          try {
            p = Promise.resolve(lookup(c.fn).apply(null, c.args));
          } catch (e) {
            p = Promise.reject(e);
          }
          return p.then(plain, plain);
        })
      );
    },
    // Starts a streaming function and resolves with the first n results.
    live: function (fn, args, n, timeoutMs) {
      return new Promise(function (resolve, reject) {
        var got = [];
        var inv = {
          setResult: function (v) {
            got.push(plain(v));
            if (got.length >= n) {
              clearTimeout(timer);
              if (inv.onCanceled) {
                inv.onCanceled();
              }
              resolve(got);
            }
          },
          onCanceled: null,
        };
        var timer = setTimeout(function () {
          if (inv.onCanceled) {
            inv.onCanceled();
          }
          reject(new Error("timeout waiting for " + n + " results, got " + JSON.stringify(got)));
        }, timeoutMs || 10000);
        lookup(fn).apply(null, args.concat([inv]));
      });
    },
    // A streaming call that stays open: returns {results, cancel}.
    stream: function (fn, args) {
      var s = { results: [], cancel: null };
      var inv = {
        setResult: function (v) {
          s.results.push(plain(v));
          if (s.onResult) {
            s.onResult(s.results);
          }
        },
        onCanceled: null,
      };
      s.cancel = function () {
        if (inv.onCanceled) {
          inv.onCanceled();
        }
      };
      lookup(fn).apply(null, args.concat([inv]));
      return s;
    },
  };

  if (typeof module !== "undefined" && module.exports) {
    module.exports = g.esTest;
  }
})(typeof globalThis !== "undefined" ? globalThis : this);
