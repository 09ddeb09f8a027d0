// lil ui: the little JavaScript the pages use, shipped in the package. The pages are
// server-rendered and work without it; it adds live updates of a run's page and keyboard
// moves on the runs page. Nothing here builds HTML from the journal's text: a live update
// swaps in a fragment the server rendered (and escaped).
"use strict";

(function () {
  const live = document.querySelector("main[data-live]");
  if (live) {
    let stamp = live.dataset.stamp;
    let busy = false;
    // Every 250 ms: a page changes within a second of the journal (the fragment's own
    // round trip included), and an unchanged run costs one small request (204).
    setInterval(async function () {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const url = live.dataset.live + "&stamp=" + encodeURIComponent(stamp);
        const response = await fetch(url, { headers: { "Accept": "text/html" } });
        if (response.status === 200) {
          const html = await response.text();
          live.innerHTML = html;  // the server's escaped fragment
          stamp = response.headers.get("X-Lil-Stamp") || stamp;
          live.dataset.updated = String(Date.now());
        }
      } catch (e) {
        // the server stopped: keep the page as it is
      } finally {
        busy = false;
      }
    }, 250);
  }

  const links = () => Array.from(document.querySelectorAll("a.run-link"));
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    const typing = target instanceof HTMLInputElement || target instanceof HTMLSelectElement ||
      target instanceof HTMLTextAreaElement;
    if (typing) return;
    const all = links();
    if (event.key === "/") {
      const first = document.querySelector(".filters input");
      if (first) { event.preventDefault(); first.focus(); }
      return;
    }
    if (!all.length) return;
    const at = all.indexOf(document.activeElement);
    let next = null;
    if (event.key === "ArrowDown" || event.key === "j") next = at < 0 ? 0 : Math.min(at + 1, all.length - 1);
    if (event.key === "ArrowUp" || event.key === "k") next = at < 0 ? 0 : Math.max(at - 1, 0);
    if (event.key === "Home") next = 0;
    if (event.key === "End") next = all.length - 1;
    if (next !== null) {
      event.preventDefault();
      all[next].focus();
    }
  });
})();
