// The Board's own script besides htmx and time.js (no inline scripts: the CSP forbids them).
// Everything here is progressive: without it the Board still works, page by page.
//
// - Live regions ([data-live-url]: the overview, the queue, Activity, an endpoint's page, an
//   open drawer) hear their teams' changes on one stream per page (board/live.py) and patch
//   themselves in place (morph below), so focus, a text selection, the scroll position and
//   a half-typed form stay where the reader left them. Without the stream (under WSGI, or
//   behind a proxy that holds it back) each reads itself again every few seconds.
// - Rows never move under the reader: a changed row is patched where it is, under the
//   pointer and the keyboard focus alike; only new todos wait, behind an "N new — show" bar.
//   The one hold is the reader's own: Pause (said as "Paused", with Resume).
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

  // Classes the page sets on the reader's behalf, never the server: the keyboard's row (j, k)
  // and the row whose drawer is open. A patch keeps them where they are (a live read used to
  // take the cursor off the row under the reader's keys, and Esc then lost its way back).
  var OWN_CLASSES = ["is-cursor", "is-open-drawer"];

  function classWithOwn(from, value) {
    var own = OWN_CLASSES.filter(function (name) { return from.classList.contains(name); });
    if (!own.length) return value;
    var names = (value || "").split(/\s+/).filter(Boolean);
    own.forEach(function (name) { if (names.indexOf(name) < 0) names.push(name); });
    return names.join(" ");
  }

  function syncAttributes(from, to) {
    var i, name, value;
    for (i = from.attributes.length - 1; i >= 0; i--) {
      name = from.attributes[i].name;
      if (name === "open" && from.tagName === "DETAILS") continue; // the reader's choice
      if (name === "class" && classWithOwn(from, "")) continue; // set below, with its own
      if (!to.hasAttribute(name)) from.removeAttribute(name);
    }
    for (i = 0; i < to.attributes.length; i++) {
      name = to.attributes[i].name;
      if (name === "open" && from.tagName === "DETAILS") continue;
      value = name === "class" ? classWithOwn(from, to.attributes[i].value) : to.attributes[i].value;
      if (from.getAttribute(name) !== value) from.setAttribute(name, value);
    }
    if (!to.hasAttribute("class") && classWithOwn(from, "")) from.setAttribute("class", classWithOwn(from, ""));
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
  // Live regions and the stream

  var MIN_GAP_MS = 1000; // a region reads itself again at most once a second
  var TICKER_LINES = 8;
  var regions = [];

  function Live(el) {
    this.el = el;
    this.id = el.id;
    this.target = el.getAttribute("data-live-target") || el.id;
    this.seconds = Math.max(1, parseInt(el.getAttribute("data-live-seconds"), 10) || 5);
    this.wants = (el.getAttribute("data-live-want") || "").split(",").filter(Boolean);
    this.isQueue = el.id === "queue";
    this.busy = false;
    this.timer = null;
    this.updated = null;
    this.lastRead = 0;
    this.count = 0; // updates and reads applied (the browser tests wait on it)
    this.arrived = {}; // ids of todos that came in since the page was drawn (the "new" bar)
    this.deferred = {}; // rows not patched because the reader's selection is in them
    this.teamCounts = {};
    this.cap = 0;
    if (this.bar()) this.setUpBar();
    this.schedule();
  }

  Live.prototype.bar = function () { return this.el.querySelector(".livebar"); };

  // What a change must touch to concern this region: "todo:12" (a drawer), "endpoint:5" (an
  // endpoint's page), "feed" (Activity), "teams" (anything of its teams).
  Live.prototype.on = function () {
    if (this.id === "drawer-panel") {
      var id = (this.el.getAttribute("data-drawer-url") || "").match(/\/todos\/(\d+)\//);
      return id ? "todo:" + id[1] : "teams";
    }
    return this.el.getAttribute("data-live-on") || "teams";
  };

  Live.prototype.schedule = function () {
    var self = this;
    clearTimeout(this.timer);
    if (Stream.live) return; // the stream says when to read
    this.timer = setTimeout(function () { self.tick(); }, this.seconds * 1000);
  };

  Live.prototype.stop = function () {
    clearTimeout(this.timer);
    this.stopped = true;
  };

  Live.prototype.attached = function () {
    return !this.stopped && document.body.contains(this.el);
  };

  Live.prototype.pauseKey = function () { return "switchboard.paused." + this.id; };

  Live.prototype.paused = function () {
    return !!this.bar() && sessionStorage.getItem(this.pauseKey()) === "1";
  };

  Live.prototype.tick = function () {
    if (!this.attached()) return;
    if (document.hidden || this.paused()) { this.schedule(); return; }
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

  // Read the region again. fresh: the newest page as it is now (the reader asked: "show"),
  // not the rows shown. At most once a second; a read asked for meanwhile follows.
  Live.prototype.refresh = function (fresh) {
    var self = this;
    if (this.busy) { this.again = this.again || fresh || "soon"; return; }
    var wait = this.lastRead + MIN_GAP_MS - Date.now();
    if (wait > 0 && !fresh) {
      clearTimeout(this.timer);
      this.timer = setTimeout(function () { self.refresh(false); }, wait);
      return;
    }
    this.busy = true;
    this.lastRead = Date.now();
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
      if (self.isQueue && !fresh) self.keepGoneRows(next);
      if (self.id === "inbox") self.keepGoneQuestions(next);
      morph(self.el, next);
      afterPatch(self.el);
      self.forgetCounted(fresh);
      self.applied();
      if (!self.el.hasAttribute("data-live-url")) self.stop();
    }).catch(function () {
      self.status(Stream.live ? "Could not read the latest; trying again" : "Could not refresh; trying again", true);
    }).then(function () {
      self.busy = false;
      if (!self.attached()) return;
      var again = self.again;
      self.again = null;
      if (again) self.refresh(again === true);
      else self.schedule();
    });
  };

  Live.prototype.applied = function () {
    if (this.id === "overview") Stalls.fromPage();
    if (this.id === "inbox") People.fromInbox(this.el);
    this.count += 1;
    this.updated = new Date();
    if (this.isQueue) this.showNewer();
    this.status(null, false);
  };

  // New todos the server's answer counted (data-newer, up to data-newest) are no longer
  // counted here too; those that came after its read still are.
  Live.prototype.forgetCounted = function (fresh) {
    var newest = parseInt(this.el.getAttribute("data-newest"), 10) || 0;
    var upto = parseInt(this.el.getAttribute("data-upto"), 10) || 0;
    for (var id in this.arrived) if (fresh ? +id <= upto : +id <= newest) delete this.arrived[id];
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

  // The Waiting page: a question the answer no longer has (answered here or elsewhere,
  // withdrawn, out of time) stays where it was, marked, its form closed, what was typed in it
  // kept: the live row itself is kept (data-keep) and a stand-in holds its place in the
  // fresh list, so nothing below it moves.
  Live.prototype.keepGoneQuestions = function (next) {
    var list = this.el.querySelector("ol[data-questions]");
    var nextList = next.querySelector("ol[data-questions]");
    if (!list || !nextList) return;
    var rows = list.children;
    for (var i = 0; i < rows.length; i++) {
      var li = rows[i];
      if (!li.id || nextList.querySelector("#" + li.id)) continue;
      goneQuestion(li);
      var standIn = document.createElement("li");
      standIn.id = li.id;
      standIn.setAttribute("data-keep", "");
      // Before the first later row the answer still has, else at the end.
      var before = null;
      for (var j = i + 1; j < rows.length && !before; j++) {
        if (rows[j].id) before = nextList.querySelector("#" + rows[j].id);
      }
      nextList.insertBefore(standIn, before);
    }
    People.fromInbox(next);
  };

  function goneQuestion(li) {
    if (li.hasAttribute("data-keep")) return;
    li.setAttribute("data-keep", "");
    // A row the reader's own answer closed says so already ("Answered: …").
    var note = li.classList.contains("is-gone") ? null : li.querySelector("[data-gone-note]");
    li.classList.add("is-gone");
    if (note) note.hidden = false;
    var controls = li.querySelectorAll("button, input, select, textarea");
    for (var i = 0; i < controls.length; i++) controls[i].disabled = true;
  }

  // How many todos of the stream's teams wait on people (the nav's count), from every
  // endpoint's counts by state; null when some team's are not known yet.
  Live.prototype.people = function () {
    if (!this.allCounts) return null;
    var n = 0;
    for (var team in this.teamCounts) {
      var endpoints = this.teamCounts[team];
      // "people": the waiting todos that wait on a person (not on other todos or children).
      for (var ep in endpoints) n += endpoints[ep].people || 0;
    }
    return n;
  };

  // -- what the stream sends (board/live.py)

  Live.prototype.ready = function (data) {
    this.teamCounts = data.counts || {};
    this.allCounts = !!data.counts; // every team's, so the nav's count can be summed
    this.cap = data.cap || 0;
    People.show(this.people());
    clearTimeout(this.timer);
    this.refresh(false); // what changed between the page's drawing and the watch
  };

  Live.prototype.onUpdate = function (u) {
    if (u.endpoints && u.endpoints.length) Stalls.changed();
    if (u.ticker) this.ticker(u.team, u.ticker); // never held: it is not where one reads
    var before = this.people();
    if (u.counts) { this.teamCounts[u.team] = u.counts; this.cap = u.cap; }
    var people = this.people();
    People.show(people);
    if (this.paused()) { this.missed = true; return; }
    if (this.on() === "people") {
      // The Waiting page reads itself when a question came or went (the count moved), or one
      // it shows changed; not for every change of its teams.
      var shown = this.el.querySelectorAll("ol[data-questions] > li[data-todo]:not(.is-gone)");
      var hit = u.many || people === null || people !== before;
      for (var k = 0; k < shown.length && !hit; k++) hit = u.todos.indexOf(+shown[k].getAttribute("data-todo")) >= 0;
      if (hit) this.refresh(false);
      return;
    }
    if (this.isQueue) { this.queueUpdate(u); return; }
    if (u.overview) { this.patchById(u); return; }
    var on = this.on();
    var hit = u.many || on === "teams" || (on === "feed" && u.feed) ||
      (on.indexOf("todo:") === 0 && u.todos.indexOf(+on.slice(5)) >= 0) ||
      (on.indexOf("endpoint:") === 0 && u.endpoints.indexOf(+on.slice(9)) >= 0);
    if (hit) this.refresh(false);
  };

  // The queue's filters as the page drew them (its tabs and the filter form).
  Live.prototype.view = function () {
    var tab = this.el.querySelector('.statetabs a[aria-current="true"]');
    var state = tab ? tab.getAttribute("data-state") : "all";
    var search = new URLSearchParams(location.search);
    return {
      state: state === "all" ? "" : state,
      endpoint: parseInt(search.get("endpoint"), 10) || 0,
      // A search, "has died", a key or a parent: only the server can say what matches.
      searched: !!(search.get("q") || search.get("died") || search.get("key") || search.get("parent")),
      newest: !search.get("before"),
    };
  };

  function passes(row, view) {
    return (!view.state || row.state === view.state) && (!view.endpoint || row.endpoint === view.endpoint);
  }

  Live.prototype.queueUpdate = function (u) {
    var view = this.view();
    var read = u.many;
    var upto = parseInt(this.el.getAttribute("data-upto"), 10) || 0;
    var rows = u.rows || {};
    for (var id in rows) {
      var tr = document.getElementById("todo-" + id);
      if (tr && this.el.contains(tr)) this.patchRow(tr, rows[id], view);
      else if (+id > upto && view.newest) {
        if (view.searched) read = true; // only the server can say whether it matches
        else if (passes(rows[id], view)) this.arrived[id] = true;
        else delete this.arrived[id];
      }
    }
    if (u.counts && !view.searched) this.showCounts(view);
    else if (u.counts) read = true; // the tabs count what the search finds
    // An empty page pushes nothing down: what arrives comes in at once.
    if (Object.keys(this.arrived).length && !this.shownIds().length) { this.refresh(true); return; }
    if (read) this.refresh(false);
    this.applied();
  };

  Live.prototype.patchRow = function (tr, row, view) {
    var selection = window.getSelection();
    if (selection && !selection.isCollapsed && tr.contains(selection.anchorNode)) {
      this.deferred[tr.getAttribute("data-todo")] = row; // after the reader lets go
      return;
    }
    var fresh = parse(row.html, tr.id);
    if (!fresh) return;
    morph(tr, fresh);
    var moved = !passes(row, view);
    tr.classList.toggle("is-moved", moved);
    var note = tr.querySelector(".moved-note");
    if (note) note.hidden = !moved;
    afterPatch(tr);
  };

  Live.prototype.patchDeferred = function () {
    var ids = Object.keys(this.deferred);
    if (!ids.length) return;
    var view = this.view();
    var rows = this.deferred;
    this.deferred = {};
    for (var i = 0; i < ids.length; i++) {
      var tr = document.getElementById("todo-" + ids[i]);
      if (tr) this.patchRow(tr, rows[ids[i]], view);
    }
  };

  // The tabs from every team's counts (each endpoint's, as board/live.py reads them).
  Live.prototype.showCounts = function (view) {
    var sums = {};
    for (var team in this.teamCounts) {
      var endpoints = this.teamCounts[team];
      for (var ep in endpoints) {
        if (view.endpoint && +ep !== view.endpoint) continue;
        for (var state in endpoints[ep]) {
          if (state === "people") continue; // a part of "waiting", not a state
          sums[state] = (sums[state] || 0) + endpoints[ep][state];
        }
      }
    }
    var cap = this.cap;
    var label = function (n, over) { return (over ? Math.min(n, cap) : n).toLocaleString("en-US") + (over ? "+" : ""); };
    var total = 0, anyOver = false;
    for (var s in sums) { total += Math.min(sums[s], cap); anyOver = anyOver || sums[s] > cap; }
    var tabs = this.el.querySelectorAll(".statetabs a[data-state]");
    for (var i = 0; i < tabs.length; i++) {
      var key = tabs[i].getAttribute("data-state");
      var count = tabs[i].querySelector(".count");
      if (!count) continue;
      var text = key === "all" ? label(total, anyOver) : label(sums[key] || 0, (sums[key] || 0) > cap);
      if (count.textContent !== text) count.textContent = text;
    }
  };

  // Elements the update draws whole (the overview's rows and totals), patched by their id;
  // an endpoint this page does not show yet has the page read again.
  Live.prototype.patchById = function (u) {
    var missing = u.many;
    for (var id in u.overview) {
      var el = document.getElementById(id);
      if (!el || !this.el.contains(el)) { missing = true; continue; }
      var fresh = parse(u.overview[id], id);
      if (fresh) { morph(el, fresh); afterPatch(el); }
    }
    if (missing) this.refresh(false);
    Stalls.fromPage();
    this.applied();
  };

  // The ticker: this team's newest lines in place of its old ones, merged with the other
  // teams' by time, the newest TICKER_LINES kept.
  Live.prototype.ticker = function (team, lines) {
    var box = this.el.querySelector("#ticker ul.feed");
    if (!box) return;
    var items = [];
    var old = box.querySelectorAll("li[data-team]");
    for (var i = 0; i < old.length; i++) {
      if (old[i].getAttribute("data-team") !== String(team)) items.push({ at: +old[i].getAttribute("data-at"), html: old[i].outerHTML });
    }
    items = items.concat(lines);
    if (!items.length) return;
    items.sort(function (a, b) { return b.at - a.at; });
    var fresh = document.createElement("ul");
    fresh.className = "feed";
    fresh.innerHTML = items.slice(0, TICKER_LINES).map(function (item) { return item.html; }).join("");
    morph(box, fresh);
    afterPatch(box);
  };

  // -- the bar: status, Pause/Resume, the "new" bar

  // "Connecting…" until the stream says ready or is refused: "Refreshes every 5 s" first and
  // "Live" a second later described two mechanisms where there is one.
  Live.prototype.status = function (reason, holding) {
    var status = this.el.querySelector("[data-live-status]");
    if (!status) return;
    var how = Stream.live ? "Live" : Stream.connecting ? "Connecting…" : "Refreshes every " + this.seconds + " s";
    var text = reason || (this.paused() ? "Paused" : how + (this.updated && !Stream.connecting ? " · updated " + clockText(this.updated) : ""));
    if (status.textContent !== text) status.textContent = text;
    status.classList.toggle("is-holding", !!holding || this.paused());
    status.classList.toggle("is-live", !reason && !this.paused() && Stream.live);
    status.classList.toggle("is-refreshing", !reason && !this.paused() && !Stream.live && !Stream.connecting);
  };

  Live.prototype.setUpBar = function () {
    var self = this;
    var bar = this.bar();
    var reload = bar.querySelector("[data-live-reload]");
    if (reload) reload.hidden = true;
    var pause = bar.querySelector("[data-live-pause]");
    if (pause) {
      pause.hidden = false;
      pause.addEventListener("click", function () {
        var paused = self.paused();
        if (paused) sessionStorage.removeItem(self.pauseKey()); else sessionStorage.setItem(self.pauseKey(), "1");
        self.syncPause();
        if (paused) { self.missed = false; self.refresh(false); }
      });
      this.syncPause();
    }
    var show = bar.querySelector("[data-live-show]");
    if (show) show.addEventListener("click", function () { self.refresh(true); });
    var auto = bar.querySelector("[data-live-auto]");
    if (auto) {
      auto.hidden = false;
      auto.addEventListener("click", function () {
        if (self.autoShow()) sessionStorage.removeItem(self.autoKey()); else sessionStorage.setItem(self.autoKey(), "1");
        self.syncAuto();
        self.showNewer();
      });
      this.syncAuto();
      var table = this.el.querySelector(".queue-main");
      if (table) table.addEventListener("pointermove", function () { self.pointedAt = Date.now(); });
    }
    this.status(null, false);
    if (this.isQueue) this.showNewer();
  };

  // "Auto-show new": new todos come in at the top by themselves, but only while the reader
  // is not in the list (no focus or selection in it, no pointer over it in the last
  // AUTO_IDLE_MS): rows never move under someone reading them.
  var AUTO_IDLE_MS = 3000;
  Live.prototype.autoKey = function () { return "switchboard.autoshow." + this.id; };
  Live.prototype.autoShow = function () { return sessionStorage.getItem(this.autoKey()) === "1"; };
  Live.prototype.syncAuto = function () {
    var auto = this.el.querySelector("[data-live-auto]");
    if (!auto) return;
    var on = this.autoShow();
    auto.setAttribute("aria-pressed", on ? "true" : "false");
    auto.classList.toggle("primary", on);
  };
  Live.prototype.idle = function () {
    var main = this.el.querySelector(".queue-main");
    var selection = window.getSelection();
    if (main && main.contains(document.activeElement) && document.activeElement !== document.body) return false;
    if (selection && !selection.isCollapsed && main && main.contains(selection.anchorNode)) return false;
    return Date.now() - (this.pointedAt || 0) > AUTO_IDLE_MS && !drawerOpen();
  };

  Live.prototype.syncPause = function () {
    var pause = this.el.querySelector("[data-live-pause]");
    var paused = this.paused();
    pause.setAttribute("aria-pressed", paused ? "true" : "false");
    pause.textContent = paused ? "Resume" : "Pause";
    pause.classList.toggle("primary", paused);
    this.status(null, false);
  };

  Live.prototype.showNewer = function () {
    var show = this.el.querySelector("[data-live-show]");
    if (!show) return;
    var newer = (parseInt(this.el.getAttribute("data-newer"), 10) || 0) + Object.keys(this.arrived).length;
    var moved = this.el.querySelectorAll("tr.is-moved, tr.is-gone").length;
    var parts = [];
    if (newer) parts.push(newer + " new");
    if (moved) parts.push(moved + " moved on");
    var text = parts.length ? parts.join(" · ") + " — show" : "";
    if (show.textContent !== text) show.textContent = text;
    show.hidden = !parts.length;
    var self = this;
    clearTimeout(this.autoTimer);
    if (newer && this.autoShow() && !this.paused()) {
      if (this.idle()) this.refresh(true);
      else this.autoTimer = setTimeout(function () { self.showNewer(); }, AUTO_IDLE_MS);
    }
  };

  function clockText(date) {
    function pad(n) { return (n < 10 ? "0" : "") + n; }
    return pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds());
  }

  // -- the stream: one per page, for what its regions show

  var Stream = {
    source: null,
    live: false,
    // Until the stream is ready or refused (a page without one never waits for it).
    connecting: !!(document.body && document.body.getAttribute("data-live-stream") && window.EventSource),
    key: null,
    start: function () {
      var url = document.body.getAttribute("data-live-stream");
      if (!url || !window.EventSource || !regions.length) return;
      var wants = {};
      regions.forEach(function (live) { live.wants.forEach(function (w) { wants[w] = true; }); });
      var key = Object.keys(wants).sort().join(",");
      if (this.source && this.source.readyState !== 2 && key === this.key) return;
      if (this.source) this.source.close();
      this.key = key;
      this.live = false;
      this.connecting = true;
      var source = this.source = new EventSource(url + "?want=" + key);
      source.addEventListener("ready", function (event) {
        Stream.live = true;
        Stream.connecting = false;
        var data = JSON.parse(event.data);
        each(function (live) { live.ready(data); });
      });
      source.addEventListener("team", function (event) {
        var update = JSON.parse(event.data);
        each(function (live) { live.onUpdate(update); });
      });
      source.addEventListener("resync", function () { each(function (live) { live.refresh(false); }); });
      // The sign-in ended (signed out, expired): no reconnect, which would only meet the 401.
      // The regions say so and go on reading on their timers: once signed in again (another
      // tab) they read the page again, as a refused stream's regions do.
      source.addEventListener("signedout", function () {
        source.close();
        Stream.live = false;
        each(function (live) { live.status("Signed out: reload to sign in", true); live.schedule(); });
      });
      // A stream the server ended for its teams (removed from one, a team switch) or its
      // password just ends: the browser reconnects after its retry and is told what it may
      // see now (a "ready" with fewer teams, or the 401).
      source.addEventListener("error", function () {
        // Reconnecting (the browser does, after the server's retry) or refused for good
        // (no stream here: 204): the regions read themselves on their timers meanwhile.
        if (Stream.connecting) {
          Stream.connecting = false;
          each(function (live) { live.status(null, false); });
        }
        if (!Stream.live) return;
        Stream.live = false;
        each(function (live) { live.status(null, false); live.schedule(); });
      });
    },
  };

  function each(fn) {
    regions = regions.filter(function (live) { return live.attached(); });
    regions.forEach(fn);
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
    Stream.start();
  }

  // After the person's own action in a drawer: the queue shows it at once; a todo they made
  // themselves ({"queue-changed": {"show": true}}) comes in at the top.
  document.addEventListener("queue-changed", function (event) {
    var queue = document.getElementById("queue");
    var show = !!(event.detail && event.detail.show);
    if (queue && queue.__live) queue.__live.refresh(show);
    // An answer, a claim or a cancel in a drawer over the Waiting page: its row says so now.
    var inbox = document.getElementById("inbox");
    if (inbox && inbox.__live) inbox.__live.refresh(false);
  });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || Stream.live) return;
    each(function (live) { if (!live.paused()) live.refresh(false); });
  });

  document.addEventListener("selectionchange", function () {
    var selection = window.getSelection();
    if (selection && !selection.isCollapsed) return;
    each(function (live) { live.patchDeferred(); });
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
    Title.set({ todo: "" });
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
    if (inDrawer) {
      var named = panel.querySelector("#drawer-title");
      var stamp = (url.match(/\/todos\/(\d+)\//) || [])[1];
      Title.set({ todo: (stamp ? "#" + stamp + " " : "") + (named ? named.textContent.trim() : "") });
    }
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

  // ---------------------------------------------------------------------------------------
  // The keyboard: shortcuts for the daily moves (SHORTCUTS, listed by "?"), the open drawer
  // keeping focus inside it (Tab and Shift+Tab go round it) and giving it back on close.
  // Never while typing in a field, nor with Ctrl, Alt or Meta (the browser's own).

  var SHORTCUTS = [
    ["j / k", "next / previous row"],
    ["Enter or o", "open the row's todo"],
    ["Esc", "close the drawer or this list"],
    ["c", "claim the open todo yourself"],
    ["/", "search the queue"],
    ["g then o", "go to the overview"],
    ["g then q", "go to the queue"],
    ["g then w", "go to what is waiting (pending)"],
    ["g then a", "go to Activity"],
    ["?", "show these shortcuts"],
  ];
  var GO = { o: "/", q: "/queue/", w: "/queue/?state=pending", a: "/activity/" };

  function typing(target) {
    return !!(target && target.closest && (target.closest("input, textarea, select, [contenteditable]")));
  }

  function focusables(root) {
    var found = root.querySelectorAll('a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex="-1"])');
    return Array.prototype.filter.call(found, function (el) { return el.offsetParent !== null || el === document.activeElement; });
  }

  // The rows j and k move through: the queue's todos, else the overview's endpoints, else
  // Activity's lines. Each row is entered by its first link.
  function rows() {
    var found = document.querySelectorAll("table.queue tbody[data-rows] > tr[data-todo]:not(.is-gone), table.overview tbody > tr, main .feed > li[data-key]");
    return Array.prototype.filter.call(found, function (row) { return row.offsetParent !== null && rowLink(row); });
  }

  function rowLink(row) {
    return row.querySelector(".col-title a, td.col-ep a, a[hx-get], a[href]");
  }

  function moveRow(step) {
    var list = rows();
    if (!list.length) return;
    var at = -1;
    for (var i = 0; i < list.length; i++) if (list[i].contains(document.activeElement) || list[i].classList.contains("is-cursor")) { at = i; break; }
    var next = list[Math.min(Math.max(at + step, 0), list.length - 1)];
    if (at < 0) next = list[step > 0 ? 0 : list.length - 1];
    for (var j = 0; j < list.length; j++) list[j].classList.remove("is-cursor");
    next.classList.add("is-cursor");
    var link = rowLink(next);
    link.focus({ preventScroll: true });
    next.scrollIntoView({ block: "nearest" });
  }

  function currentRowLink() {
    var list = rows();
    for (var i = 0; i < list.length; i++) if (list[i].classList.contains("is-cursor") || list[i].contains(document.activeElement)) return rowLink(list[i]);
    return null;
  }

  function shortcutsOpen() { return !!document.getElementById("shortcuts"); }

  // A dialog of the Board's own (the shortcuts, a confirmation): a modal box over the page
  // and its panel, headed by the title that names it (#<id>-title).
  function dialog(id, role, heading) {
    var box = document.createElement("div");
    box.id = id;
    box.className = "shortcuts";
    box.setAttribute("role", role);
    box.setAttribute("aria-modal", "true");
    box.setAttribute("aria-labelledby", id + "-title");
    var panel = document.createElement("div");
    panel.className = "shortcuts-panel";
    var title = document.createElement("h2");
    title.id = id + "-title";
    title.textContent = heading;
    panel.appendChild(title);
    box.appendChild(panel);
    return { box: box, panel: panel };
  }

  function showShortcuts() {
    if (shortcutsOpen()) return;
    var opener = document.activeElement;
    var shown = dialog("shortcuts", "dialog", "Keyboard shortcuts");
    var box = shown.box, panel = shown.panel;
    var list = document.createElement("dl");
    SHORTCUTS.forEach(function (pair) {
      var row = document.createElement("div");
      var keys = document.createElement("dt");
      pair[0].split(" ").forEach(function (word) {
        if (word === "/" && pair[0] !== "/" || word === "then" || word === "or") { keys.appendChild(document.createTextNode(" " + word + " ")); return; }
        var kbd = document.createElement("kbd");
        kbd.textContent = word;
        keys.appendChild(kbd);
      });
      var what = document.createElement("dd");
      what.textContent = pair[1];
      row.appendChild(keys);
      row.appendChild(what);
      list.appendChild(row);
    });
    panel.appendChild(list);
    var close = document.createElement("button");
    close.type = "button";
    close.className = "btn";
    close.textContent = "Close";
    close.addEventListener("click", function () { hideShortcuts(); });
    panel.appendChild(close);
    box.__opener = opener;
    box.addEventListener("click", function (event) { if (event.target === box) hideShortcuts(); });
    document.body.appendChild(box);
    close.focus();
  }

  function hideShortcuts() {
    var box = document.getElementById("shortcuts");
    if (!box) return;
    var opener = box.__opener;
    box.remove();
    if (opener && document.body.contains(opener)) opener.focus({ preventScroll: true });
  }

  // A drawer action asked first (Cancel, Take over, Release their lease: hx-confirm) asks in
  // a dialog of the Board's own, not the browser's confirm(): the same words as the page a
  // browser without JavaScript gets, the act named on its button, Esc or Back to leave it.
  function askFirst(question, elt, go) {
    var opener = document.activeElement;
    var button = elt.querySelector && elt.querySelector("button[type=submit], button:not([type])");
    var act = button ? button.textContent.replace(/…$/, "").trim() : "Go ahead";
    var shown = dialog("confirm", "alertdialog", act + "?");
    var box = shown.box, panel = shown.panel;
    box.setAttribute("aria-describedby", "confirm-text");
    var text = document.createElement("p");
    text.id = "confirm-text";
    text.textContent = question;
    var row = document.createElement("p");
    row.className = "row-actions";
    var yes = document.createElement("button");
    yes.type = "button";
    yes.className = "btn " + (button && button.classList.contains("danger") ? "danger" : "primary");
    yes.textContent = act;
    var no = document.createElement("button");
    no.type = "button";
    no.className = "btn";
    no.textContent = "Back, change nothing";
    row.appendChild(yes);
    row.appendChild(no);
    panel.appendChild(text);
    panel.appendChild(row);
    function close() {
      box.remove();
      if (opener && document.body.contains(opener)) opener.focus({ preventScroll: true });
    }
    yes.addEventListener("click", function () { close(); go(); });
    no.addEventListener("click", close);
    box.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); close(); }
    });
    document.body.appendChild(box);
    no.focus();
  }

  document.addEventListener("htmx:confirm", function (event) {
    if (!event.detail.question) return;
    event.preventDefault();
    askFirst(event.detail.question, event.detail.elt, function () { event.detail.issueRequest(true); });
  });

  // Tab and Shift+Tab go round the open dialog (a question, the shortcuts, else the drawer).
  function trapFocus(event) {
    var root = document.getElementById("confirm") || document.getElementById("shortcuts") || (drawerOpen() ? drawerHost() : null);
    if (!root) return false;
    var stops = focusables(root);
    if (!stops.length) return false;
    var first = stops[0], last = stops[stops.length - 1];
    var inside = root.contains(document.activeElement);
    if (event.shiftKey && (document.activeElement === first || !inside)) { last.focus(); return true; }
    if (!event.shiftKey && (document.activeElement === last || !inside)) { first.focus(); return true; }
    return false;
  }

  var pendingGo = 0;

  document.addEventListener("keydown", function (event) {
    if (event.key === "Tab") {
      if (trapFocus(event)) event.preventDefault();
      return;
    }
    if (document.getElementById("confirm")) return; // its own keys (Esc: leave it)
    if (event.key === "Escape") {
      if (shortcutsOpen()) { event.preventDefault(); hideShortcuts(); return; }
      if (!drawerOpen()) return;
      if (typing(event.target) && event.target.value) return;
      event.preventDefault();
      closeDrawer(false);
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target) || event.defaultPrevented) return;
    if (shortcutsOpen()) return;
    var key = event.key;
    if (pendingGo && Date.now() - pendingGo < 1500 && GO[key]) {
      pendingGo = 0;
      event.preventDefault();
      location.assign(GO[key]);
      return;
    }
    pendingGo = 0;
    var inDrawer = drawerOpen() && drawerHost().contains(document.activeElement);
    if (key === "g") { pendingGo = Date.now(); return; }
    if (key === "?") { event.preventDefault(); showShortcuts(); return; }
    if (key === "/") {
      var search = document.querySelector('main input[type=search][name=q]');
      if (search) { event.preventDefault(); search.focus(); search.select(); }
      return;
    }
    if (key === "c" && drawerOpen()) {
      var claim = drawerHost().querySelector('button[data-action="claim"]');
      if (claim) { event.preventDefault(); claim.click(); }
      return;
    }
    if (inDrawer) return; // the drawer's own controls take Enter; j and k are the list's
    if (key === "j" || key === "k") { event.preventDefault(); moveRow(key === "j" ? 1 : -1); return; }
    if (key === "o" || (key === "Enter" && event.target === document.body)) {
      var link = currentRowLink();
      if (link) { event.preventDefault(); link.click(); }
    }
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
  // The tab's title: "(1 stalled) #12 Rebuild docs · Queue · Switchboard". The page's own
  // title, with the open drawer's todo and the stalled endpoints' count before it.

  var Title = {
    page: null,
    todo: "",
    stalled: 0,
    set: function (what) {
      if (this.page === null) this.page = document.title.replace(/^\(\d+ stalled\) /, "");
      if (what.todo !== undefined) this.todo = what.todo;
      if (what.stalled !== undefined) this.stalled = what.stalled;
      var title = (this.stalled ? "(" + this.stalled + " stalled) " : "") + (this.todo ? this.todo + " · " : "") + this.page;
      if (document.title !== title) document.title = title;
    },
  };

  // Stalled endpoints (work waits, no agent seen: queues/endpoint_health.py) in the nav, on
  // every page: the overview counts its own rows as the stream patches them; any other page
  // asks /stalls/ on load, every STALLS_SECONDS while shown, and soon after the stream says
  // an endpoint changed.
  var STALLS_SECONDS = 30;
  var Stalls = {
    badge: null,
    timer: null,
    last: 0,
    start: function () {
      this.badge = document.querySelector("[data-nav-stalls]");
      if (!this.badge) return;
      if (document.getElementById("overview")) { this.fromPage(); return; }
      this.ask();
    },
    fromPage: function () {
      if (!this.badge) return;
      var rows = document.querySelectorAll("#overview tr[data-stalled]");
      this.show(rows.length);
    },
    changed: function () {
      if (!this.badge || document.getElementById("overview")) return;
      var self = this;
      var wait = this.last + 10000 - Date.now();
      clearTimeout(this.timer);
      this.timer = setTimeout(function () { self.ask(); }, Math.max(wait, 1000));
    },
    ask: function () {
      var self = this;
      clearTimeout(this.timer);
      if (document.hidden) { this.timer = setTimeout(function () { self.ask(); }, STALLS_SECONDS * 1000); return; }
      this.last = Date.now();
      fetch(this.badge.getAttribute("data-stalls-url"), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok && !response.redirected ? response.json() : null; })
        .then(function (data) {
          if (!data) return;
          self.show(data.stalled.length, data.stalled);
          if (!People.live()) People.show(data.people);
        })
        .catch(function () {})
        .then(function () { self.timer = setTimeout(function () { self.ask(); }, STALLS_SECONDS * 1000); });
    },
    show: function (n, which) {
      var badge = this.badge;
      var text = n ? "⚠ " + n + " stalled" : "";
      if (badge.textContent !== text) {
        badge.textContent = "";
        if (n) {
          var icon = document.createElement("span");
          icon.setAttribute("aria-hidden", "true");
          icon.textContent = "⚠";
          badge.appendChild(icon);
          badge.appendChild(document.createTextNode(" " + n + " stalled"));
        }
      }
      badge.hidden = !n;
      if (which) badge.title = which.map(function (s) { return s.agent_id + ": " + s.words; }).join("\n");
      Title.set({ stalled: n });
    },
  };

  // The nav's Waiting count: todos of the Board's teams waiting on people. Drawn by the
  // server on the Waiting page and the overview; kept by the stream's counts on any page that
  // holds one, and by the Waiting page's own reads without it.
  var People = {
    show: function (n) {
      var badge = document.querySelector("[data-nav-people]");
      if (!badge || n === null || n === undefined) return;
      var text = n ? " " + n + " on people" : "";
      if (badge.textContent !== text) {
        badge.textContent = "";
        if (n) {
          badge.appendChild(document.createTextNode(" "));
          var count = document.createElement("span");
          count.className = "nav-count";
          count.textContent = String(n);
          badge.appendChild(count);
          var words = document.createElement("span");
          words.className = "sr-only";
          words.textContent = " on people";
          badge.appendChild(words);
        }
      }
      badge.hidden = !n;
    },
    // A region of this page keeps the count from the stream (every team's counts): /stalls/'
    // answer, read on a timer, is older than that and is not shown over it.
    live: function () {
      return Stream.live && regions.some(function (region) { return region.attached() && region.allCounts; });
    },
    fromInbox: function (root) {
      var inbox = root && root.id === "inbox" ? root : root && root.querySelector("#inbox");
      if (!inbox || !inbox.hasAttribute("data-nav-total")) return;
      this.show(parseInt(inbox.getAttribute("data-nav-total"), 10) || 0);
    },
  };

  // ---------------------------------------------------------------------------------------

  function start() {
    if (drawerHost() && !(history.state && history.state.board)) history.replaceState({ board: "page" }, "");
    startRegions(document);
    Stalls.start();
    var all = document.querySelector("[data-pick-all]");
    if (all) all.hidden = false;
    var hints = document.querySelectorAll("[data-js-only]");
    for (var h = 0; h < hints.length; h++) hints[h].hidden = false;
    var fields = document.querySelectorAll("[data-max-bytes]");
    for (var i = 0; i < fields.length; i++) checkBytes(fields[i]);
  }

  document.addEventListener("htmx:afterSettle", function () { startRegions(document); });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
