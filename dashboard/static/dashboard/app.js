// Shardline dashboard: live fragments and confirmed actions. No framework:
// an element with data-poll="URL" is refreshed from that URL every
// data-every milliseconds; a form with data-confirm asks before it submits.
(function () {
  "use strict";

  function poll(element) {
    var url = element.getAttribute("data-poll");
    var every = parseInt(element.getAttribute("data-every") || "3000", 10);
    function refresh() {
      if (document.hidden) { return schedule(); }
      fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
        .then(function (response) {
          if (response.redirected || !response.ok) { throw new Error("HTTP " + response.status); }
          return response.text();
        })
        .then(function (html) { element.innerHTML = html; element.removeAttribute("data-stale"); })
        .catch(function () { element.setAttribute("data-stale", "true"); })
        .then(schedule);
    }
    function schedule() { window.setTimeout(refresh, every); }
    schedule();
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-poll]"), poll);
    document.addEventListener("submit", function (event) {
      var message = event.target.getAttribute("data-confirm");
      if (message && !window.confirm(message)) { event.preventDefault(); }
    });
  });
})();
