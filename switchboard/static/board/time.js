// Times on the Board and in admin: every <time data-when> is sent with its full date and
// time in UTC as text ("2026-12-01 08:14:05 UTC"), which is what a reader without JavaScript
// sees. Here it is shown in the browser's time zone ("2026-12-01 00:14:05 PST"), with UTC on
// hover; relative ones ("in 4m 12s", "3m ago") tick every second; a date and time typed into
// a form is in that zone too. No inline script (CSP).
(function () {
  "use strict";

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function zoneName(date) {
    try {
      var parts = new Intl.DateTimeFormat("en-US", { timeZoneName: "short" }).formatToParts(date);
      for (var i = 0; i < parts.length; i++) if (parts[i].type === "timeZoneName") return parts[i].value;
    } catch (e) { /* an old browser: the offset below */ }
    var offset = -date.getTimezoneOffset();
    return "UTC" + (offset >= 0 ? "+" : "-") + pad(Math.floor(Math.abs(offset) / 60)) + ":" + pad(Math.abs(offset) % 60);
  }

  function localDay(date) {
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate());
  }

  function local(date) {
    return localDay(date) + " " + pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" +
      pad(date.getSeconds()) + " " + zoneName(date);
  }

  function utc(date) {
    return date.getUTCFullYear() + "-" + pad(date.getUTCMonth() + 1) + "-" + pad(date.getUTCDate()) +
      " " + pad(date.getUTCHours()) + ":" + pad(date.getUTCMinutes()) + ":" + pad(date.getUTCSeconds()) + " UTC";
  }

  // The same words as the server's (board/drawer.py span): 4s, 2m 13s, 12m, 3h 05m, 4d.
  function span(seconds) {
    seconds = Math.floor(Math.abs(seconds));
    if (seconds < 60) return seconds + "s";
    var minutes = Math.floor(seconds / 60); seconds %= 60;
    if (minutes < 60) return minutes < 10 ? minutes + "m " + pad(seconds) + "s" : minutes + "m";
    var hours = Math.floor(minutes / 60); minutes %= 60;
    if (hours < 48) return hours + "h " + pad(minutes) + "m";
    return Math.floor(hours / 24) + "d";
  }

  function relative(date, style) {
    var delta = (date.getTime() - Date.now()) / 1000;
    if (style === "ago") return Math.abs(delta) < 5 ? "just now" : span(delta) + " ago";
    if (style === "for") return Math.abs(delta) < 5 ? "a moment" : span(delta);
    return delta >= 0 ? "in " + span(delta) : span(delta) + " ago";
  }

  function render(el) {
    var date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) return;
    var style = el.getAttribute("data-when");
    var text;
    if (style === "ago" || style === "until" || style === "for") {
      text = relative(date, style);
      var title = local(date) + " · " + utc(date);
      if (el.title !== title) el.title = title;
    } else {
      text = style === "date" ? localDay(date) : local(date);
      if (el.title !== utc(date)) el.title = utc(date);
    }
    // Only a changed text is written, so a selection over a time that did not change stays.
    if (el.textContent !== text) el.textContent = text;
  }

  function renderAll(root) {
    var times = (root || document).querySelectorAll("time[data-when]");
    for (var i = 0; i < times.length; i++) render(times[i]);
  }

  // A date and time typed into a form (<input type="datetime-local" data-local-datetime>, New
  // todo's "Not before"): the server sends and reads it in UTC, and says so. Here it is shown
  // and typed in the browser's zone instead, and sent with its offset ("2030-01-02T09:30-08:00")
  // by a hidden field that takes the input's name; the label and the hint name the zone.
  function offsetText(date) {
    var offset = -date.getTimezoneOffset();
    return (offset >= 0 ? "+" : "-") + pad(Math.floor(Math.abs(offset) / 60)) + ":" + pad(Math.abs(offset) % 60);
  }

  function zoneId() {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return ""; }
  }

  function inputValue(date) {
    return localDay(date) + "T" + pad(date.getHours()) + ":" + pad(date.getMinutes());
  }

  function withOffset(value) {
    var m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d))?$/.exec(value);
    if (!m) return value; // not a date the input gives: the server says what is wrong
    var at = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0));
    return value + offsetText(at);
  }

  function localInput(input) {
    var name = input.getAttribute("name");
    if (input.__local || !name || !input.form) return;
    input.__local = true;
    var sent = document.createElement("input");
    sent.type = "hidden";
    sent.name = name;
    input.removeAttribute("name");
    input.form.appendChild(sent);
    var utcValue = input.getAttribute("value") || "";
    if (utcValue) {
      var date = new Date(/(Z|[+-]\d\d:\d\d)$/i.test(utcValue) ? utcValue : utcValue + "Z");
      if (!isNaN(date.getTime())) input.value = inputValue(date);
    }
    function sync() { sent.value = input.value ? withOffset(input.value) : ""; }
    sync();
    input.addEventListener("input", sync);
    input.addEventListener("change", sync);
    input.form.addEventListener("submit", sync);

    var zone = zoneName(new Date());
    var id = zoneId();
    var label = input.closest("label");
    var title = label && label.querySelector("[data-local-label]");
    var hint = label && label.querySelector("[data-local-hint]");
    if (title) title.textContent = title.textContent.replace("UTC", zone);
    if (hint) {
      hint.textContent = hint.textContent.replace(
        "UTC", zone + " (your browser's time zone" + (id ? ", " + id : "") + ")");
    }
  }

  function localInputs(root) {
    var inputs = (root || document).querySelectorAll("input[data-local-datetime]");
    for (var i = 0; i < inputs.length; i++) localInput(inputs[i]);
  }

  window.SwitchboardTime = { renderAll: renderAll, render: render, local: local, utc: utc, span: span };

  function start() {
    renderAll(document);
    localInputs(document);
    setInterval(function () {
      var times = document.querySelectorAll('time[data-when="ago"], time[data-when="until"]');
      for (var i = 0; i < times.length; i++) render(times[i]);
    }, 1000);
    // htmx swaps (drawers, Activity) bring new times in.
    document.addEventListener("htmx:afterSettle", function (event) {
      renderAll(event.detail.elt || document);
      localInputs(event.detail.elt || document);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
