// Times on the Board and in admin: every <time data-when> is sent with its full date and
// time in UTC as text ("2026-12-01 08:14:05 UTC"), which is what a reader without JavaScript
// sees. Here it is shown in the browser's time zone ("2026-12-01 00:14:05 PST"), with UTC on
// hover; relative ones ("in 4m 12s", "3m ago") tick every second. No inline script (CSP).
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
    return delta >= 0 ? "in " + span(delta) : span(delta) + " ago";
  }

  function render(el) {
    var date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) return;
    var style = el.getAttribute("data-when");
    var text;
    if (style === "ago" || style === "until") {
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

  window.SwitchboardTime = { renderAll: renderAll, render: render, local: local, utc: utc, span: span };

  function start() {
    renderAll(document);
    setInterval(function () {
      var times = document.querySelectorAll('time[data-when="ago"], time[data-when="until"]');
      for (var i = 0; i < times.length; i++) render(times[i]);
    }, 1000);
    // htmx swaps (drawers, Activity) bring new times in.
    document.addEventListener("htmx:afterSettle", function (event) { renderAll(event.detail.elt || document); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
