// The Board's only script besides htmx (no inline scripts: the CSP forbids them).
// Everything here is progressive: without it the Board still works, page by page.
(function () {
  "use strict";

  // Close the drawer: go Back when we came from the queue (htmx restores that page),
  // otherwise follow the link to the queue.
  document.addEventListener("click", function (event) {
    var close = event.target.closest("[data-drawer-close]");
    if (close && document.getElementById("drawer") && history.state && history.state.htmx) {
      event.preventDefault();
      history.back();
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

  // Escape closes an open drawer.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var drawer = document.getElementById("drawer");
    var close = drawer && drawer.querySelector("[data-drawer-close]");
    if (close) close.click();
  });

  // The team switcher submits on change.
  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-autosubmit]")) event.target.form.submit();
  });

  // After htmx swaps a drawer in, move focus into it for keyboard users.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "drawer") {
      var heading = event.detail.target.querySelector("h1");
      if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus({ preventScroll: true }); }
    }
  });
})();
