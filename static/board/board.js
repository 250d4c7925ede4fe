// The Board's own script besides htmx and time.js (no inline scripts: the CSP forbids them).
// Everything here is progressive: without it the Board still works, page by page.
//
// - Live regions ([data-live-url]: the queue, Activity, an open drawer) are read again every
//   few seconds and patched in place (morph below), so focus, a text selection, the scroll
//   position and a half-typed form stay where the reader left them.
// - The queue holds still while the pointer or focus is in it, while text in it is selected,
//   or when paused; new todos wait behind an "N new — show" bar instead of pushing rows down.
// - The drawer keeps one history entry over the page it opened on: ✕, Esc and Back close it.
(function () {
  "use strict";

  var Time = function () { return window.SwitchboardTime; };

  // ---------------------------------------------------------------------------------------
  // Morph: make the live tree `from` look like the fresh tree `to`, touching only what
  // differs. Elements pair up by id, data-key or data-todo, else by position and tag.

  function keyOf(node) {
    if (node.nodeType !== 1) return "";
    // The attribute, not node.id: a form's id property names its control called "id", if any.
    return node.getAttribute("id") || node.getAttribute("data-key") || node.getAttribute("data-todo") || "";
  }

  function samePlace(a, b) {
    return a.nodeType === b.nodeType && (a.nodeType !== 1 || (a.tagName === b.tagName && keyOf(a) === keyOf(b)));
  }

  function hasTyped(el) {
    var fields = el.querySelectorAll("textarea, input[type=text], input:not([type])");
    for (var i = 0; i < fields.length; i++) if (fields[i].value !== fields[i].defaultValue) return true;
    return el.contains(document.activeElement);
  }

  function kept(el) {
    return el.nodeType === 1 && (el.hasAttribute("data-keep") || (el.hasAttribute("data-keep-typed") && hasTyped(el)));
  }

  function syncAttributes(from, to) {
    var i, name;
    for (i = from.attributes.length - 1; i >= 0; i--) {
      name = from.attributes[i].name;
      if (name === "open" && from.tagName === "DETAILS") continue; // the reader's choice
      if (!to.hasAttribute(name)) from.removeAttribute(name);
    }
    for (i = 0; i < to.attributes.length; i++) {
      name = to.attributes[i].name;
      if (name === "open" && from.tagName === "DETAILS") continue;
      if (from.getAttribute(name) !== to.attributes[i].value) from.setAttribute(name, to.attributes[i].value);
    }
  }

  function morph(from, to) {
    if (from.nodeType !== 1) {
      if (from.nodeValue !== to.nodeValue) from.nodeValue = to.nodeValue;
      return;
    }
    if (kept(from)) return;
    if (from.tagName === "TIME" && from.hasAttribute("data-when")) {
      // Its text is written here (time.js); only a new instant or style changes it.
      if (from.getAttribute("datetime") === to.getAttribute("datetime") &&
          from.getAttribute("data-when") === to.getAttribute("data-when")) return;
      syncAttributes(from, to);
      from.textContent = to.textContent;
      if (Time()) Time().render(from);
      return;
    }
    syncAttributes(from, to);
    morphChildren(from, to);
  }

  function morphChildren(from, to) {
    var current = from.firstChild;
    var fresh = Array.prototype.slice.call(to.childNodes);
    for (var i = 0; i < fresh.length; i++) {
      var next = fresh[i];
      var key = keyOf(next);
      var match = null;
      if (current && samePlace(current, next)) {
        match = current;
      } else if (key) {
        for (var probe = current; probe; probe = probe.nextSibling) {
          if (samePlace(probe, next)) { match = probe; break; }
        }
      }
      if (match) {
        // Anything kept between here and the match stays; the rest of what lies between
        // is gone from the fresh tree.
        while (current && current !== match) {
          var gone = current;
          current = current.nextSibling;
          if (!kept(gone)) from.removeChild(gone);
        }
        morph(match, next);
        current = match.nextSibling;
      } else {
        from.insertBefore(document.importNode(next, true), current);
      }
    }
    while (current) {
      var rest = current;
      current = current.nextSibling;
      if (!kept(rest)) from.removeChild(rest);
      else if (rest.hasAttribute("data-keep-typed")) outdated(rest);
    }
  }

  // A form with typed text that the fresh drawer no longer offers: kept for its text, but it
  // can no longer be sent.
  function outdated(el) {
    if (el.classList.contains("is-outdated")) return;
    el.classList.add("is-outdated");
    var buttons = el.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) buttons[i].disabled = true;
    var note = document.createElement("p");
    note.className = "notice stale";
    note.textContent = "This todo moved on, so this can no longer be sent. Your text is kept here to copy.";
    el.insertBefore(note, el.firstChild);
  }

  function parse(html, id) {
    var template = document.createElement("template");
    template.innerHTML = html;
    return template.content.getElementById(id) || template.content.querySelector("#" + id);
  }

  function afterPatch(root) {
    if (window.htmx) window.htmx.process(root);
    if (Time()) Time().renderAll(root);
  }

  // ---------------------------------------------------------------------------------------
  // Live regions

  var PAUSE_KEY = "switchboard.queue.paused";
  var regions = [];

  function Live(el) {
    this.el = el;
    this.id = el.id;
    this.target = el.getAttribute("data-live-target") || el.id;
    this.seconds = Math.max(1, parseInt(el.getAttribute("data-live-seconds"), 10) || 5);
    this.isQueue = el.id === "queue";
    this.busy = false;
    this.timer = null;
    this.updated = null;
    this.count = 0; // refreshes applied (the browser tests wait on it)
    if (this.isQueue) this.setUpQueue();
    this.schedule();
  }

  Live.prototype.schedule = function () {
    var self = this;
    clearTimeout(this.timer);
    this.timer = setTimeout(function () { self.tick(); }, this.seconds * 1000);
  };

  Live.prototype.stop = function () {
    clearTimeout(this.timer);
    this.stopped = true;
  };

  Live.prototype.attached = function () {
    return !this.stopped && document.body.contains(this.el);
  };

  Live.prototype.holdReason = function () {
    // A drawer always says what is true now (a form with typed text is kept by morph).
    if (this.id === "drawer-panel") return null;
    if (this.isQueue && sessionStorage.getItem(PAUSE_KEY) === "1") return "Paused";
    var el = this.el;
    var active = document.activeElement;
    if (active && active !== document.body && el.contains(active) && !active.closest("[data-keep]")) {
      return "Holding still while you are in the queue";
    }
    var selection = window.getSelection();
    if (selection && !selection.isCollapsed && selection.rangeCount &&
        el.contains(selection.getRangeAt(0).commonAncestorContainer)) {
      return "Holding still while text is selected";
    }
    if (el.matches(":hover") && !el.querySelector("[data-keep]:hover")) {
      return "Holding still while the pointer is over the queue";
    }
    return null;
  };

  Live.prototype.tick = function () {
    if (!this.attached()) return;
    if (document.hidden) { this.schedule(); return; }
    var reason = this.holdReason();
    if (reason) { this.status(reason, true); this.schedule(); return; }
    this.refresh(false);
  };

  Live.prototype.url = function (fresh) {
    var url = this.el.getAttribute("data-live-url");
    if (!this.isQueue || fresh) return url;
    var shown = this.shownIds();
    if (!shown.length) return url;
    var sep = url.indexOf("?") >= 0 ? "&" : "?";
    return url + sep + "shown=" + shown.join(",") + "&upto=" + (this.el.getAttribute("data-upto") || "");
  };

  Live.prototype.shownIds = function () {
    var rows = this.el.querySelectorAll("tbody[data-rows] > tr[data-todo]");
    var ids = [];
    for (var i = 0; i < rows.length && ids.length < 50; i++) {
      if (!rows[i].classList.contains("is-gone")) ids.push(rows[i].getAttribute("data-todo"));
    }
    return ids;
  };

  // fresh: the newest page as it is now (the reader asked: "show"), not the rows shown.
  Live.prototype.refresh = function (fresh) {
    var self = this;
    if (this.busy) { this.again = this.again || fresh || "soon"; return; }
    this.busy = true;
    clearTimeout(this.timer);
    fetch(this.url(fresh), {
      headers: { "HX-Request": "true", "HX-Target": this.target },
      credentials: "same-origin",
    }).then(function (response) {
      if (response.redirected && /\/login\//.test(response.url)) { self.status("Signed out: reload to sign in", true); return null; }
      // A drawer whose todo is gone (or left the reader's teams) shows the 404 page's words.
      if (!response.ok && !(response.status === 404 && !self.isQueue)) throw new Error("HTTP " + response.status);
      return response.text();
    }).then(function (html) {
      if (html === null || !self.attached()) return;
      var next = parse(html, self.id);
      if (!next) throw new Error("no #" + self.id + " in the answer");
      self.apply(next, fresh);
      self.count += 1;
      if (!self.el.hasAttribute("data-live-url")) { self.stop(); return; }
      self.updated = new Date();
      self.status(null, false);
    }).catch(function () {
      self.status("Could not refresh; trying again", true);
    }).then(function () {
      self.busy = false;
      if (!self.attached()) return;
      var again = self.again;
      self.again = null;
      if (again) self.refresh(again === true);
      else self.schedule();
    });
  };

  Live.prototype.apply = function (next, fresh) {
    if (this.isQueue && !fresh) this.keepGoneRows(next);
    morph(this.el, next);
    afterPatch(this.el);
    if (this.isQueue) this.showNewer();
  };

  // A shown row the answer no longer has (its todo was deleted) stays where it was, marked.
  Live.prototype.keepGoneRows = function (next) {
    var body = this.el.querySelector("tbody[data-rows]");
    var nextBody = next.querySelector("tbody[data-rows]");
    if (!body || !nextBody) return;
    var rows = body.children;
    for (var i = 0; i < rows.length; i++) {
      var id = rows[i].getAttribute("data-todo");
      if (!id || nextBody.querySelector('tr[data-todo="' + id + '"]')) continue;
      var copy = rows[i].cloneNode(true);
      copy.classList.add("is-gone");
      copy.setAttribute("data-keep", "");
      var before = null;
      for (var j = 0; j < nextBody.children.length; j++) {
        if (parseInt(nextBody.children[j].getAttribute("data-todo"), 10) < parseInt(id, 10)) { before = nextBody.children[j]; break; }
      }
      nextBody.insertBefore(copy, before);
    }
  };

  Live.prototype.status = function (reason, holding) {
    var status = this.el.querySelector("[data-live-status]");
    if (!status) return;
    var text = reason || ("Live · updated " + (this.updated ? clockText(this.updated) : "just now"));
    if (status.textContent !== text) status.textContent = text;
    status.classList.toggle("is-holding", !!holding);
  };

  Live.prototype.setUpQueue = function () {
    var self = this;
    var bar = this.el.querySelector(".livebar");
    if (!bar) return;
    var reload = bar.querySelector("[data-live-reload]");
    if (reload) reload.hidden = true;
    var pause = bar.querySelector("[data-live-pause]");
    pause.hidden = false;
    this.syncPause();
    pause.addEventListener("click", function () {
      var paused = sessionStorage.getItem(PAUSE_KEY) === "1";
      if (paused) sessionStorage.removeItem(PAUSE_KEY); else sessionStorage.setItem(PAUSE_KEY, "1");
      self.syncPause();
      if (paused) self.refresh(false);
    });
    bar.querySelector("[data-live-show]").addEventListener("click", function () {
      self.refresh(true);
    });
    this.status(null, false);
    this.showNewer();
  };

  Live.prototype.syncPause = function () {
    var pause = this.el.querySelector("[data-live-pause]");
    var paused = sessionStorage.getItem(PAUSE_KEY) === "1";
    pause.setAttribute("aria-pressed", paused ? "true" : "false");
    pause.textContent = paused ? "Resume" : "Pause";
    this.status(paused ? "Paused" : null, paused);
  };

  Live.prototype.showNewer = function () {
    var show = this.el.querySelector("[data-live-show]");
    if (!show) return;
    var newer = parseInt(this.el.getAttribute("data-newer"), 10) || 0;
    var moved = this.el.querySelectorAll("tr.is-moved, tr.is-gone").length;
    var parts = [];
    if (newer) parts.push(newer + " new");
    if (moved) parts.push(moved + " moved on");
    var text = parts.length ? parts.join(" · ") + " — show" : "";
    if (show.textContent !== text) show.textContent = text;
    show.hidden = !parts.length;
  };

  function clockText(date) {
    function pad(n) { return (n < 10 ? "0" : "") + n; }
    return pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds());
  }

  function startRegions(root) {
    var found = (root || document).querySelectorAll("[data-live-url]");
    for (var i = 0; i < found.length; i++) {
      var el = found[i];
      if (el.__live && !el.__live.stopped) continue;
      el.__live = new Live(el);
      regions.push(el.__live);
    }
    regions = regions.filter(function (live) { return live.attached(); });
  }

  // After the person's own action in a drawer: the queue shows it at once, held or not; a
  // todo they made themselves ({"queue-changed": {"show": true}}) comes in at the top.
  document.addEventListener("queue-changed", function (event) {
    var queue = document.getElementById("queue");
    var show = !!(event.detail && event.detail.show);
    if (queue && queue.__live) queue.__live.refresh(show);
  });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) return;
    regions.forEach(function (live) { if (live.attached() && !live.holdReason()) live.refresh(false); });
  });

  // ---------------------------------------------------------------------------------------
  // The drawer and its history: one entry over the page it opened on.

  function drawerHost() { return document.getElementById("drawer"); }

  function drawerOpen() {
    var host = drawerHost();
    return !!(host && host.querySelector("#drawer-panel"));
  }

  function markOpenRow() {
    var panel = document.getElementById("drawer-panel");
    var id = panel && (panel.getAttribute("data-drawer-url") || "").match(/\/todos\/(\d+)\//);
    var rows = document.querySelectorAll("table.queue tr.is-open-drawer");
    for (var i = 0; i < rows.length; i++) rows[i].classList.remove("is-open-drawer");
    if (id && drawerOpen()) {
      var row = document.getElementById("todo-" + id[1]);
      if (row) row.classList.add("is-open-drawer");
    }
  }

  function closeDrawer(viaHistory) {
    var host = drawerHost();
    if (!host) return;
    var panel = host.querySelector("#drawer-panel");
    if (panel && panel.__live) panel.__live.stop();
    host.innerHTML = "";
    markOpenRow();
    var state = history.state;
    if (!viaHistory && state && state.board === "drawer") history.back();
    var opener = host.__opener;
    host.__opener = null;
    if (opener && document.body.contains(opener)) opener.focus({ preventScroll: true });
  }

  function openFromHistory() {
    if (!window.htmx) { location.reload(); return; }
    window.htmx.ajax("GET", location.pathname + location.search, { target: "#drawer", swap: "innerHTML" });
  }

  window.addEventListener("popstate", function (event) {
    if (!drawerHost()) return;
    var state = event.state;
    if (state && state.board === "drawer") openFromHistory();
    else if (drawerOpen()) closeDrawer(true);
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var host = drawerHost();
    if (host && event.detail.target === host) {
      var opener = event.detail.elt;
      if (opener && !host.contains(opener)) host.__opener = opener;
    }
  });

  // After a swap that brought a drawer in (a row's link into #drawer, a try or round into
  // #drawer-panel): its URL becomes the page's, as one history entry over the page below.
  document.addEventListener("htmx:afterSwap", function (event) {
    var panel = document.getElementById("drawer-panel");
    if (!panel) return;
    var url = panel.getAttribute("data-drawer-url");
    var host = drawerHost();
    var inDrawer = host && host.contains(panel);
    if (url && inDrawer) {
      var state = history.state;
      if (state && state.board === "drawer") {
        if (location.pathname + location.search !== url) history.replaceState(state, "", url);
      } else {
        history.replaceState({ board: "page" }, "");
        history.pushState({ board: "drawer" }, "", url);
      }
    } else if (url && location.pathname + location.search !== url) {
      history.replaceState(history.state, "", url); // the drawer as a whole page
    }
    markOpenRow();
    // A drawer just opened: move focus into it for keyboard users.
    if (event.detail.target && event.detail.target.id === "drawer") {
      var heading = event.detail.target.querySelector("h1");
      if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus({ preventScroll: true }); }
    }
  });

  document.addEventListener("click", function (event) {
    var close = event.target.closest("[data-drawer-close]");
    if (close && drawerHost() && drawerHost().contains(close)) {
      event.preventDefault();
      closeDrawer(false);
      return;
    }
    var copy = event.target.closest("[data-copy]");
    if (copy) {
      var source = document.getElementById(copy.getAttribute("data-copy"));
      if (source && navigator.clipboard) {
        navigator.clipboard.writeText(source.textContent.trim()).then(function () {
          copy.textContent = "Copied";
        });
      }
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || !drawerOpen()) return;
    if (event.target.closest && event.target.closest("textarea, input, select") && event.target.value) return;
    event.preventDefault();
    closeDrawer(false);
  });

  // ---------------------------------------------------------------------------------------
  // Forms: submit on change where marked; byte limits said as you type, and kept to.

  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-autosubmit]")) event.target.form.submit();
    // The queue's "select every row on this page" box (bulk rerun and cancel): ticks the
    // rows' boxes; without JavaScript it stays hidden and each row is ticked by hand.
    if (event.target.matches("[data-pick-all]")) {
      var picks = document.querySelectorAll("tbody[data-rows] [data-pick]");
      for (var i = 0; i < picks.length; i++) picks[i].checked = event.target.checked;
    }
  });

  function bytes(text) { return new TextEncoder().encode(text).length; }

  function kib(n) { return n < 1024 ? n + " bytes" : (n / 1024).toFixed(n < 10240 ? 1 : 0) + " KiB"; }

  function checkBytes(field) {
    var max = parseInt(field.getAttribute("data-max-bytes"), 10);
    var out = document.getElementById(field.getAttribute("data-bytes-out"));
    var n = bytes(field.value);
    if (out) {
      out.textContent = kib(n) + " of " + kib(max) + (n > max ? ": too long, shorten it to send" : "");
      out.classList.toggle("error", n > max);
    }
    field.setCustomValidity(n > max ? "At most " + kib(max) + " (this is " + kib(n) + ")." : "");
    return n <= max;
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches("[data-max-bytes]")) checkBytes(event.target);
  });

  document.addEventListener("submit", function (event) {
    var fields = event.target.querySelectorAll("[data-max-bytes]");
    for (var i = 0; i < fields.length; i++) {
      if (!checkBytes(fields[i])) {
        event.preventDefault();
        fields[i].focus();
        return;
      }
    }
  }, true);

  // ---------------------------------------------------------------------------------------

  function start() {
    if (drawerHost() && !(history.state && history.state.board)) history.replaceState({ board: "page" }, "");
    startRegions(document);
    var all = document.querySelector("[data-pick-all]");
    if (all) all.hidden = false;
    var fields = document.querySelectorAll("[data-max-bytes]");
    for (var i = 0; i < fields.length; i++) checkBytes(fields[i]);
  }

  document.addEventListener("htmx:afterSettle", function () { startRegions(document); });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
