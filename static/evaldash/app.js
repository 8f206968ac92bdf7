// evaldash: the little JavaScript the pages need. No inline script anywhere (CSP).
(function () {
  "use strict";

  function drawCharts(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-plotly]").forEach(function (el) {
      var src = document.getElementById(el.dataset.plotly);
      // A chart in a closed <details> has no width yet: it is drawn when opened.
      if (!src || el.dataset.drawn || el.closest("details:not([open])")) return;
      var fig = JSON.parse(src.textContent);
      window.Plotly.newPlot(el, fig.data, themed(fig.layout || {}), { displaylogo: false, responsive: true });
      el.dataset.drawn = "1";
    });
  }

  // Charts follow the system's dark setting, as the page does: a transparent canvas, light
  // text and faint grid lines.
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)");
  function themed(layout) {
    if (!dark || !dark.matches) return layout;
    var ink = "#e3e8ee", grid = "#33404c";
    layout.paper_bgcolor = "rgba(0,0,0,0)";
    layout.plot_bgcolor = "rgba(0,0,0,0)";
    layout.font = Object.assign({}, layout.font, { color: ink });
    ["xaxis", "yaxis"].forEach(function (a) {
      layout[a] = Object.assign({}, layout[a], { gridcolor: grid, zerolinecolor: grid, linecolor: grid });
    });
    return layout;
  }
  // A change of the setting redraws what is drawn.
  if (dark && dark.addEventListener) {
    dark.addEventListener("change", function () {
      document.querySelectorAll("[data-plotly][data-drawn]").forEach(function (el) {
        if (window.Plotly) window.Plotly.purge(el);
        delete el.dataset.drawn;
      });
      drawCharts(document);
    });
  }

  function loadPlotlyThenDraw() {
    if (!document.querySelector("[data-plotly]")) return;
    if (window.Plotly) { drawCharts(document); return; }
    var s = document.createElement("script");
    s.src = document.body.dataset.plotlySrc;
    s.onload = function () { drawCharts(document); };
    document.head.appendChild(s);
  }

  function wireUpload() {
    var form = document.getElementById("upload-form");
    if (!form) return;
    var input = form.querySelector("input[type=file]");
    var list = document.getElementById("chosen");
    var bar = document.getElementById("upload-progress");
    function show() {
      list.textContent = "";
      Array.prototype.forEach.call(input.files, function (f) {
        var li = document.createElement("li");
        li.textContent = f.name + " (" + Math.round(f.size / 1024) + " KiB)";
        list.appendChild(li);
      });
    }
    input.addEventListener("change", show);
    ["dragenter", "dragover"].forEach(function (t) {
      form.addEventListener(t, function (e) { e.preventDefault(); form.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (t) {
      form.addEventListener(t, function (e) { e.preventDefault(); form.classList.remove("over"); });
    });
    form.addEventListener("drop", function (e) {
      if (e.dataTransfer && e.dataTransfer.files.length) { input.files = e.dataTransfer.files; show(); }
    });
    var button = form.querySelector("button[type=submit]");
    var percent = document.getElementById("upload-percent");
    form.addEventListener("htmx:beforeRequest", function () {
      button.disabled = true;
      percent.textContent = "sending… 0%";
    });
    form.addEventListener("htmx:xhr:progress", function (e) {
      if (!e.detail.lengthComputable) return;
      var done = Math.floor((e.detail.loaded / e.detail.total) * 100);
      bar.hidden = false;
      bar.value = done;
      percent.textContent = done < 100 ? "sending… " + done + "%" : "sent; reading and storing…";
    });
    form.addEventListener("htmx:afterRequest", function () {
      bar.hidden = true;
      bar.value = 0;
      button.disabled = false;
      percent.textContent = "";
    });
  }

  // The compare form shows only what the chosen kind needs, and finds runs by part of their id.
  function wireCompareForm() {
    var form = document.getElementById("compare-form");
    if (!form) return;
    var kind = form.querySelector("select[name=kind]");
    function showKind() {
      form.querySelectorAll("[data-kind]").forEach(function (label) {
        var wanted = label.dataset.kind.split(" ").indexOf(kind.value || "runs") >= 0;
        label.hidden = !wanted;
        label.querySelectorAll("select, input[type=checkbox]").forEach(function (s) { s.disabled = !wanted; });
      });
    }
    kind.addEventListener("change", showKind);
    showKind();
    var find = form.querySelector("input[data-filters-runs]");
    if (find) {
      find.addEventListener("input", function () {
        var needle = find.value.trim().toLowerCase();
        form.querySelectorAll("select[name=baseline], select[name=candidate], select[name=run]").forEach(function (s) {
          Array.prototype.forEach.call(s.options, function (o) {
            o.hidden = !!needle && o.value !== "" && o.text.toLowerCase().indexOf(needle) < 0 && !o.selected;
          });
        });
      });
    }
  }

  // A long id, one click from the clipboard (the page shows it cut short).
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button.copy[data-copy]");
    if (!button) return;
    var text = button.dataset.copy;
    function done() { button.textContent = "copied"; setTimeout(function () { button.textContent = "copy"; }, 1500); }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {
      var area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
      done();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    loadPlotlyThenDraw();
    wireUpload();
    wireCompareForm();
  });
  document.addEventListener("htmx:afterSettle", function (e) { loadPlotlyThenDraw(); });
  // A filter left empty is no filter: it stays out of the address (and the pushed history).
  document.addEventListener("htmx:configRequest", function (e) {
    if (e.detail.verb !== "get") return;
    var params = e.detail.parameters;
    var keys = typeof params.keys === "function" ? Array.from(params.keys()) : Object.keys(params);
    keys.forEach(function (k) {
      var v = typeof params.getAll === "function" ? params.getAll(k) : [params[k]];
      if (v.every(function (x) { return x === "" || x === undefined; })) {
        if (typeof params.delete === "function") params.delete(k); else delete params[k];
      }
    });
  });
  document.addEventListener("toggle", function (e) {
    if (e.target.open) loadPlotlyThenDraw();
  }, true);
  // An error answer is shown where the person acted: beside the form (or link) that asked.
  function anchorOf(elt) {
    return elt && elt.closest && (elt.closest("form") || elt);
  }
  function errorBox(elt) {
    var anchor = anchorOf(elt) || document.querySelector("main");
    var box = anchor.nextElementSibling;
    if (!box || !box.classList.contains("request-error")) {
      box = document.createElement("p");
      box.className = "request-error";
      box.setAttribute("role", "alert");
      anchor.insertAdjacentElement("afterend", box);
    }
    return box;
  }
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail.xhr;
    var said = xhr.getResponseHeader("X-Error");
    var plain = (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
    errorBox(e.detail.elt).textContent = said
      ? said
      : plain && xhr.responseText.trim()
        ? xhr.responseText.trim()
        : "The server answered " + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") + ".";
  });
  document.addEventListener("htmx:sendError", function (e) {
    errorBox(e.detail.elt).textContent = "The server could not be reached; nothing changed.";
  });
  // A request that succeeds takes away the note of the one that failed before it.
  function clearRequestError(e) {
    if (!e.detail.successful) return;
    var anchor = anchorOf(e.detail.elt);
    var box = anchor && anchor.nextElementSibling;
    if (box && box.classList.contains("request-error")) box.remove();
  }

  // Controls follow the address: after Back or Forward restores a page, each filter shows what
  // the list below it was filtered by (a restored snapshot keeps the controls as first drawn).
  function followAddress() {
    var params = new URLSearchParams(window.location.search);
    document.querySelectorAll("form.filters").forEach(function (form) {
      if ((form.getAttribute("method") || "get").toLowerCase() !== "get") return;
      Array.prototype.forEach.call(form.elements, function (el) {
        if (!el.name || el.type === "submit" || el.type === "button") return;
        var values = params.getAll(el.name);
        if (el.tagName === "SELECT") {
          Array.prototype.forEach.call(el.options, function (o) {
            o.selected = el.multiple ? values.indexOf(o.value) >= 0 : o.value === (values[0] || "");
          });
          if (!el.multiple && values.length === 0 && el.options.length) {
            var empty = Array.prototype.find.call(el.options, function (o) { return o.value === ""; });
            if (empty) empty.selected = true;
          }
        } else if (el.type === "checkbox" || el.type === "radio") {
          el.checked = values.indexOf(el.value) >= 0;
        } else {
          el.value = values[0] || "";
        }
      });
    });
  }
  // The snapshot htmx keeps for Back and Forward is taken as the answer to a click arrives, while
  // that click's marks are still up: the old target dimmed with its "Loading" note, the clicked
  // tab already highlighted. The snapshot is put back as the page was before the click (the live
  // page is left alone: the answer replaces it next), and charts in it are drawn again when it is
  // restored rather than coming back as a lifeless picture.
  function asBeforeTheClick(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    var root = t.content;
    root.querySelectorAll("[aria-busy]").forEach(function (el) { el.removeAttribute("aria-busy"); });
    root.querySelectorAll("nav.tabs").forEach(function (nav) {
      var was = nav.querySelectorAll("a[data-was-current]");
      if (!was.length) return;
      nav.querySelectorAll("a").forEach(function (a) {
        a.classList.remove("current");
        a.removeAttribute("aria-current");
      });
      was.forEach(function (a) {
        a.classList.add("current");
        a.setAttribute("aria-current", a.dataset.wasCurrent);
        delete a.dataset.wasCurrent;
      });
    });
    root.querySelectorAll("[data-plotly][data-drawn]").forEach(function (el) {
      delete el.dataset.drawn;
      el.textContent = "";
      el.classList.remove("js-plotly-plot");
    });
    root.querySelectorAll(".row-cursor").forEach(function (el) { el.classList.remove("row-cursor"); });
    return t.innerHTML;
  }
  document.addEventListener("htmx:historyItemCreated", function (e) {
    e.detail.item.content = asBeforeTheClick(e.detail.item.content);
  });
  // A restored page is new markup: its controls follow the address, and its forms are wired again.
  document.addEventListener("htmx:historyRestore", function () {
    followAddress();
    wireUpload();
    wireCompareForm();
    loadPlotlyThenDraw();
  });
  // A filter form asks again only for a list it does not show yet: Enter in a field fires both
  // "change" and "submit", and the second would add the same address to the history twice.
  function entries(params) {
    var out = [];
    params.forEach(function (v, k) { if (v !== "") out.push(k + "=" + v); });
    return out.sort().join("&");
  }
  function listShownAlready(e) {
    var form = e.detail.elt;
    if (!form.matches || !form.matches("form.filters[hx-push-url]")) return false;
    var action = new URL(form.getAttribute("hx-get") || "", window.location.href).pathname;
    if (action !== window.location.pathname) return false;
    return entries(new FormData(form)) === entries(new URLSearchParams(window.location.search));
  }
  // A request under way shows where its answer will go: its target is marked busy (dimmed, with
  // a note) until the answer replaces it, and a clicked tab is highlighted at once (put back if the
  // request fails).
  function markBusy(e) {
    var target = e.detail.target;
    if (target && target.setAttribute) target.setAttribute("aria-busy", "true");
    var link = e.detail.elt;
    var nav = link && link.tagName === "A" && link.closest("nav.tabs");
    if (!nav) return;
    nav.querySelectorAll("a").forEach(function (a) {
      if (a.classList.contains("current")) a.dataset.wasCurrent = a.getAttribute("aria-current") || "true";
      a.classList.remove("current");
      a.removeAttribute("aria-current");
    });
    link.classList.add("current");
    link.setAttribute("aria-current", "page");
  }
  function settleBusy(e) {
    var target = e.detail.target;
    if (target && target.removeAttribute) target.removeAttribute("aria-busy");
    var link = e.detail.elt;
    var nav = link && link.tagName === "A" && link.closest && link.closest("nav.tabs");
    if (!nav) return;
    nav.querySelectorAll("a").forEach(function (a) {
      if (!e.detail.successful) {
        a.classList.remove("current");
        a.removeAttribute("aria-current");
        if (a.dataset.wasCurrent) { a.classList.add("current"); a.setAttribute("aria-current", a.dataset.wasCurrent); }
      }
      delete a.dataset.wasCurrent;
    });
  }
  // One handler for each end of a request, so the order of what happens is read in one place.
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (listShownAlready(e)) {
      e.preventDefault();
      return;
    }
    markBusy(e);
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    clearRequestError(e);
    settleBusy(e);
  });
  // Keys, as in other trace viewers: j or → the next attempt, k or ← the previous one (the
  // attempt page's own links); on a list (runs, attempts, search hits, cases) j and k move a row
  // cursor and Enter opens the row; / the search words (on another page: the search page, its
  // words field focused), ? this list. Never while typing, and never with a modifier held (the
  // browser's own shortcuts stay).
  var KEYS = [
    ["j  or  →", "next attempt (on an attempt's page)"],
    ["k  or  ←", "previous attempt"],
    ["j  /  k", "next / previous row of a list; Enter opens it"],
    ["/", "search"],
    ["j  /  k", "next / previous item (the review queue)"],
    ["1 … 9", "label the item (the review queue)"],
    ["?", "this list of keys"],
    ["Esc", "close it"],
  ];
  function keyHelp() {
    var dialog = document.getElementById("key-help");
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.id = "key-help";
      dialog.setAttribute("aria-label", "Keyboard keys");
      var h = document.createElement("h2");
      h.textContent = "Keys";
      dialog.appendChild(h);
      var dl = document.createElement("dl");
      KEYS.forEach(function (k) {
        var dt = document.createElement("dt"), dd = document.createElement("dd"), kbd = document.createElement("kbd");
        kbd.textContent = k[0];
        dt.appendChild(kbd);
        dd.textContent = k[1];
        dl.appendChild(dt);
        dl.appendChild(dd);
      });
      dialog.appendChild(dl);
      var close = document.createElement("button");
      close.type = "button";
      close.textContent = "Close";
      close.addEventListener("click", function () { dialog.close(); });
      dialog.appendChild(close);
      document.body.appendChild(dialog);
    }
    if (!dialog.open) dialog.showModal();
  }
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (document.querySelector("dialog[open]") && e.key !== "?") return;
    var go = null;
    if (e.key === "j" || e.key === "ArrowRight") go = document.querySelector("nav.neighbours a[rel=next]");
    else if (e.key === "k" || e.key === "ArrowLeft") go = document.querySelector("nav.neighbours a[rel=prev]");
    if (go) { e.preventDefault(); go.click(); return; }
    if ((e.key === "j" || e.key === "k") && moveCursor(e.key === "j" ? 1 : -1)) { e.preventDefault(); return; }
    if (e.key === "/") {
      e.preventDefault();
      if (focusSearch()) return;
      var page = document.querySelector("header.top a[data-search]");
      if (page) {
        try { sessionStorage.setItem("evaldash-focus-search", "1"); } catch (err) { /* storage off: no focus */ }
        window.location.href = page.href;
      }
      return;
    }
    if (e.key === "?") { e.preventDefault(); keyHelp(); }
  });

  // The search's words field (not any search box: the compare page's finds a run).
  function focusSearch() {
    var field = document.querySelector("main form[role=search] input[name=q]");
    if (!field) return false;
    field.focus();
    field.select();
    return true;
  }
  // Sent here by / from another page: the words field takes the keys at once.
  document.addEventListener("DOMContentLoaded", function () {
    var asked = null;
    try { asked = sessionStorage.getItem("evaldash-focus-search"); sessionStorage.removeItem("evaldash-focus-search"); } catch (err) { return; }
    if (asked) focusSearch();
  });
  // The row cursor of a list: the row holding the focus (or the marked one) moves by `step`; the
  // row's first link takes the focus, so Enter opens it as a click would.
  function moveCursor(step) {
    var list = Array.prototype.find.call(document.querySelectorAll("main [data-cursor-rows]"), function (el) {
      return el.offsetParent !== null && el.children.length;
    });
    if (!list) return false;
    var rows = Array.prototype.filter.call(list.children, function (r) { return r.querySelector("a[href]"); });
    if (!rows.length) return false;
    var at = rows.findIndex(function (r) { return r.contains(document.activeElement) || r.classList.contains("row-cursor"); });
    var next = at < 0 ? (step > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + step));
    rows.forEach(function (r) { r.classList.remove("row-cursor"); r.removeAttribute("aria-current"); });
    var row = rows[next];
    row.classList.add("row-cursor");
    row.setAttribute("aria-current", "true");
    row.querySelector("a[href]").focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
    return true;
  }
  // The review queue: j and k move between its items, a digit labels the current one (its
  // button of that number, a real form, so the queue also works without this).
  function reviewItems() { return Array.from(document.querySelectorAll("[data-review-item]")); }
  function reviewMove(items, to) {
    if (!items.length) return;
    to = Math.max(0, Math.min(items.length - 1, to));
    items.forEach(function (li, n) { li.classList.toggle("current", n === to); });
    items[to].focus({ preventScroll: true });
    items[to].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    if (!document.querySelector("[data-review]")) return;
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (document.querySelector("dialog[open]")) return;
    var items = reviewItems();
    var at = items.findIndex(function (li) { return li.classList.contains("current"); });
    if (e.key === "j" || e.key === "k") {
      e.preventDefault();
      reviewMove(items, at < 0 ? 0 : at + (e.key === "j" ? 1 : -1));
    } else if (/^[1-9]$/.test(e.key) && at >= 0) {
      var button = items[at].querySelector('button[data-key="' + e.key + '"]');
      if (!button) return;
      e.preventDefault();
      // The item leaves the queue once labelled: the next one becomes current.
      var rest = items.filter(function (li, n) { return n !== at; });
      button.click();
      reviewMove(rest, at);
    }
  });

  // A page the browser kept (its back-forward cache) shows the controls as last touched.
  window.addEventListener("pageshow", function (e) { if (e.persisted) followAddress(); });

  // Error answers (400 for a bad filter, 422 for a refused upload) still carry a page to show.
  // A form whose success removes its item (the review queue's labels) shows a refusal inside
  // the item instead: the item stays, saying why it was not labelled.
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (e.detail.xhr.status !== 422) return;
    e.detail.shouldSwap = true;
    e.detail.isError = false;
    var elt = e.detail.requestConfig && e.detail.requestConfig.elt;
    var from = elt && elt.closest && elt.closest("[hx-swap]");
    if (from && from.getAttribute("hx-swap") === "delete") e.detail.swapOverride = "beforeend";
  });
})();
