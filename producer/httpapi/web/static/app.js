// bulkreg seller pages: the drop zone and the in-place check on the upload
// page, and the live progress of an upload over server-sent events. The
// pages work without it; this only saves a round trip and a reload.
"use strict";

(function () {
  function messages() {
    var el = document.getElementById("i18n");
    return el ? JSON.parse(el.textContent) : {};
  }
  // fmt fills Go-style verbs: %d, %s, %% and explicit %[2]d.
  function fmt(s) {
    var args = Array.prototype.slice.call(arguments, 1), i = 0;
    return s.replace(/%(?:\[(\d+)\])?([ds%])/g, function (m, n, v) {
      if (v === "%") return "%";
      if (n) { i = Number(n); return String(args[i - 1]); }
      return String(args[i++]);
    });
  }

  // setText sets el's text, each time's date, and its half of the day,
  // clock and zone, kept on one line each (zone.go keepTimes): a phone
  // breaks between the two only.
  var clockText = /\d{4}-\d{2}-\d{2}|(?:오전|오후) \d{1,2}:\d{2}:\d{2} \([^()<>]*\)|\d{1,2}:\d{2}:\d{2} [AP]M \([^()<>]*\)/g;
  function setText(el, text) {
    el.textContent = "";
    var at = 0;
    String(text).replace(clockText, function (m, i) {
      el.appendChild(document.createTextNode(text.slice(at, i)));
      var s = document.createElement("span");
      s.className = "at"; s.textContent = m;
      el.appendChild(s);
      at = i + m.length;
      return m;
    });
    el.appendChild(document.createTextNode(String(text).slice(at)));
  }

  // The browser's time zone, for the service to say times in from the next
  // answer on (zone.go); a page says the zone of every time it shows.
  function rememberZone() {
    var tz = "";
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return; }
    if (!/^[A-Za-z0-9_\/+-]{1,64}$/.test(tz)) return;
    var c = "bulkreg_tz=" + tz;
    if (document.cookie.split("; ").indexOf(c) >= 0) return;
    document.cookie = c + "; path=/; max-age=31536000; samesite=lax" + (location.protocol === "https:" ? "; secure" : "");
  }

  // Signing out in one tab ends the live views of the others: the
  // service ends their streams and refuses their reads (it knows the
  // session ended), and this message lets them stop at once.
  var session = window.BroadcastChannel ? new BroadcastChannel("bulkreg-session") : null, onSignedOut = [];
  function signedOut() {
    onSignedOut.splice(0).forEach(function (f) { f(); });
    dropSellerHeader();
    var main = document.getElementById("main"), m = messages();
    if (!main || document.getElementById("signed-out") || !m["live.signedout"]) return;
    var p = document.createElement("p");
    p.id = "signed-out"; p.className = "notice"; p.setAttribute("role", "status");
    p.textContent = m["live.signedout"];
    main.insertBefore(p, main.firstChild);
  }
  function sessionEvents() {
    if (session) session.onmessage = function (e) { if (e.data === "signed-out") signedOut(); };
    document.addEventListener("submit", function (e) {
      if (session && e.target.getAttribute("action") === "/signout") session.postMessage("signed-out");
    });
  }

  // History: while an upload on the page is unfinished, the page reads
  // itself again every data-poll ms (the service's events interval) and
  // puts each row's changed cells in place, so focus and scrolling stay.
  // It stops once every row is done, pauses while the tab is hidden, and
  // stops when the session ended.
  function historyPage() {
    var table = document.querySelector("table.uploads");
    if (!table || !window.fetch || !window.DOMParser) return;
    var every = Number(table.dataset.poll) || 1000, stopped = false, timer = 0;
    onSignedOut.push(function () { stopped = true; clearTimeout(timer); });
    function live() { return table.querySelector('tbody tr[data-live="true"]'); }
    function update(doc) {
      var fresh = doc.querySelector("table.uploads");
      if (!fresh) return;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) {
        var f = fresh.querySelector('tbody tr[data-id="' + tr.dataset.id + '"]');
        if (!f) return;
        for (var i = 0; i < tr.cells.length && i < f.cells.length; i++) {
          var c = tr.cells[i], n = f.cells[i];
          if (c.tagName === "TD" && c.innerHTML !== n.innerHTML) { c.innerHTML = n.innerHTML; c.className = n.className; }
        }
        tr.dataset.live = f.dataset.live;
      });
      table.dataset.received = String(Number(table.dataset.received || 0) + 1);
    }
    function poll() {
      if (stopped || !live()) return;
      if (document.hidden) { timer = setTimeout(poll, every); return; }
      fetch(location.href, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
        if (r.status === 401) { signedOut(); return null; }
        return r.ok ? r.text() : null;
      }).then(function (html) {
        if (html && !stopped) update(new DOMParser().parseFromString(html, "text/html"));
      }).catch(function () {}).then(function () {
        if (!stopped) timer = setTimeout(poll, every);
      });
    }
    timer = setTimeout(poll, every);
  }

  // Jump to a cell: the problem list's links scroll the cell into view
  // below the sticky header (CSS scroll-margin) and focus it, so the next
  // Tab goes on from the cell, not from the top of the page.
  function cellLinks() {
    document.addEventListener("click", function (e) {
      var a = e.target.closest && e.target.closest('a.cell[href^="#cell-"]');
      if (!a) return;
      var cell = document.getElementById(a.getAttribute("href").slice(1));
      if (!cell) return;
      e.preventDefault();
      if (!cell.hasAttribute("tabindex")) cell.tabIndex = -1;
      cell.scrollIntoView({ block: "nearest", inline: "nearest" });
      cell.focus({ preventScroll: true });
      // The page scrolls too when the preview box itself is off screen.
      var box = cell.closest(".scroll");
      if (box) {
        var r = box.getBoundingClientRect();
        if (r.top < 0 || r.bottom > window.innerHeight) box.scrollIntoView({ block: "nearest" });
      }
      history.replaceState(null, "", a.getAttribute("href"));
      // Nothing focusable follows the preview, so Tab from the cell would
      // wrap to the skip link: it goes on to the next problem's link (the
      // list read in order, cell after cell), or to Register after the last.
      var li = a.closest("li"), next = li && li.nextElementSibling && li.nextElementSibling.querySelector("a.cell");
      next = next || document.getElementById("register-below") || document.getElementById("register");
      if (next) cell.onkeydown = function (k) {
        if (k.key !== "Tab" || k.shiftKey) return;
        k.preventDefault();
        cell.onkeydown = null;
        next.focus();
      };
    });
  }

  // The session ended while the page was open (signed out in another tab,
  // or expired): the page's answer says to sign in again, and the header
  // stops naming the seller and offering their menu.
  function dropSellerHeader() {
    document.querySelectorAll(".top .who, .top .signout, .top nav:not(.lang)").forEach(function (el) { el.remove(); });
  }

  // Upload page: drop a file on the zone; Check answers in place so the
  // chosen file stays chosen for Register.
  function uploadPage() {
    var form = document.getElementById("upload-form");
    if (!form) return;
    var input = document.getElementById("file"), drop = document.getElementById("drop");
    var result = document.getElementById("check-result"), check = document.getElementById("check");
    ["dragenter", "dragover"].forEach(function (t) {
      drop.addEventListener(t, function (e) { e.preventDefault(); drop.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (t) {
      drop.addEventListener(t, function () { drop.classList.remove("over"); });
    });
    drop.addEventListener("drop", function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) { input.files = e.dataTransfer.files; input.focus(); }
    });
    var register = document.getElementById("register"), confirmed = document.getElementById("confirmed");
    function runCheck(then) {
      var label = check.textContent;
      check.disabled = true; register.disabled = true;
      check.textContent = check.dataset.working || label;
      var token = document.querySelector('meta[name="csrf-token"]');
      var body = new FormData(form);
      body.delete("confirmed");
      return fetch("/upload/check", {
        method: "POST", body: body, credentials: "same-origin",
        headers: { "X-CSRF-Token": token ? token.content : "", "X-Fragment": "1" }
      }).then(function (r) {
        return r.text().then(function (html) { return { status: r.status, ok: r.ok, html: html }; });
      }).then(function (a) {
        result.innerHTML = a.html;
        if (a.status === 401) dropSellerHeader();
        if (!a.ok) { // a notice in place of the result: sign in again, or try later
          var n = document.getElementById("notice-title");
          if (n) n.focus();
          return;
        }
        then();
      }).finally(function () { check.disabled = false; register.disabled = false; check.textContent = label; });
    }
    check.addEventListener("click", function (e) {
      if (!input.files.length) return; // the browser says the file is required
      e.preventDefault();
      runCheck(function () {
        var title = document.getElementById("check-title");
        if (title) title.focus();
      }).catch(function () { form.action = "/upload/check"; form.submit(); });
    });
    // Register checks first and says what it will do; when any row would
    // be skipped it asks before registering (the server asks too, for a
    // post without confirmed=1).
    register.addEventListener("click", function (e) {
      if (!input.files.length || confirmed.value === "1") return;
      e.preventDefault();
      runCheck(function () {
        var plan = document.getElementById("plan"), ask = document.getElementById("confirm");
        if (!plan) { var t = document.getElementById("check-title"); if (t) t.focus(); return; } // refused: the reasons show
        if (plan.dataset.skips !== "true") { confirmed.value = "1"; form.action = "/upload"; form.submit(); return; }
        if (!ask) { plan.focus(); return; } // nothing to register: the plan says so
        ask.hidden = false;
        var yes = document.getElementById("confirm-register") || document.getElementById("confirm-title");
        if (yes) { if (!yes.hasAttribute("tabindex") && yes.tagName !== "BUTTON") yes.tabIndex = -1; yes.focus(); }
      }).catch(function () { form.submit(); });
    });
    result.addEventListener("click", function (e) {
      // Register below the problem list is Register.
      if (e.target.id === "register-below") { e.preventDefault(); register.click(); return; }
      if (e.target.id === "confirm-register") { confirmed.value = "1"; form.action = "/upload"; }
      if (e.target.id === "confirm-cancel") {
        document.getElementById("confirm").hidden = true;
        confirmed.value = "";
        register.focus();
      }
    });
    input.addEventListener("change", function () { confirmed.value = ""; });
  }

  // Upload detail: counts, bar, finish estimate and failed rows as the
  // events come; the estimate's "in about …" ticks every second.
  function progressPage() {
    var sec = document.getElementById("progress");
    if (!sec) return;
    // Arriving from Register (or a link), a screen reader starts at the
    // page's heading, not at the top of the document.
    var title = document.getElementById("detail-title");
    if (title && (document.activeElement === document.body || !document.activeElement)) title.focus();
    if (!window.EventSource) return;
    var m = messages();
    var eta = document.getElementById("eta"), etaAt = eta.dataset.eta ? new Date(eta.dataset.eta) : null, etaText = eta.dataset.at || "";
    var done = sec.dataset.done === "true";
    var outage = document.getElementById("outage"), market = outage.dataset.marketplace || "";
    var waiting = document.getElementById("waiting"), ahead = document.getElementById("ahead"), pace = document.getElementById("pace");
    // say fills the text of key with the count n, in its form for one
    // ("1 row") when n is 1 and the page sent one (key + ".one").
    function say(key, n) { return fmt(n === 1 && m[key + ".one"] || m[key], n); }
    function dur(ms) {
      var s = Math.max(0, Math.round(ms / 1000));
      return s < 60 ? fmt(m["dur.sec"], s) : fmt(m["dur.min"], Math.floor(s / 60), s % 60);
    }
    var endText = eta.textContent;
    function showETA() {
      if (done) { setText(eta, endText); return; }
      // No countdown while the marketplace does not answer: nobody knows.
      if (market === "not_answering") { eta.textContent = m["outage.eta"]; return; }
      if (market === "failing") { eta.textContent = m["failing.eta"]; return; }
      if (market === "misconfigured") { eta.textContent = m["paused.eta"]; return; }
      if (!etaAt) { eta.textContent = m["detail.eta.none"]; return; }
      var left = etaAt - Date.now();
      // The instant as the server says it (eta_text): one format, the zone named.
      setText(eta, left < 1000 ? m["detail.eta.now"] : fmt(m["detail.eta"], dur(left), etaText));
    }
    function set(id, v) { document.getElementById(id).textContent = v; }
    function showOutage(p) {
      market = !p.done && (p.marketplace === "not_answering" || p.marketplace === "failing" || p.marketplace === "misconfigured") ? p.marketplace : "";
      outage.dataset.marketplace = market;
      ["not_answering", "failing", "misconfigured"].forEach(function (k) {
        document.getElementById("outage-" + k).hidden = market !== k;
        document.getElementById("outage-" + k + "-body").hidden = market !== k;
      });
      outage.hidden = market === "";
    }
    function showEnd(p) {
      var end = "", cls = ["state", "bar", "eta"];
      if (p.end) {
        end = p.end; // the server's end state and words (pages.go endState)
        endText = p.end_text;
      } else if (p.done) {
        endText = m["detail.done"];
      }
      cls.forEach(function (id) {
        var el = document.getElementById(id);
        el.classList.remove("end-ok", "end-other", "end-partial", "end-failed");
        if (end) el.classList.add("end-" + end);
      });
      set("state", end ? m["state.done." + end] : m["state." + p.state] || p.state);
      var fix = document.getElementById("fix");
      fix.hidden = !(p.to_fix > 0) || !end;
      document.getElementById("report-failed-item").hidden = !(p.failed > 0);
      document.getElementById("fix-file").textContent = say("end.fix", p.to_fix || 0);
      waiting.hidden = p.done;
      if (ahead && waiting.dataset.aheadFormat) {
        ahead.hidden = !(p.rows_ahead > 0);
        if (p.rows_ahead > 0) ahead.textContent = fmt(p.rows_ahead === 1 && m["wait.ahead.one"] || waiting.dataset.aheadFormat, p.rows_ahead);
        if (pace) pace.hidden = p.rows_ahead > 0;
      }
    }
    // A cell of the seller's text, set apart (<bdi>): a right-to-left
    // override in it must not turn the page's words around it.
    function isolatedCell(tr, text) {
      var b = document.createElement("bdi");
      b.textContent = text || "";
      tr.insertCell().appendChild(b);
    }
    // The rows a list leaves out (the server sends at most a bound of them).
    function more(id, n, key) {
      var el = document.getElementById(id);
      el.hidden = !(n > 0);
      el.textContent = n > 0 ? say(key || "detail.rows.more", n) : "";
    }
    function failedRows(rows, left) {
      var table = document.getElementById("failed"), body = table.tBodies[0];
      body.textContent = "";
      rows.forEach(function (r) {
        var tr = body.insertRow(), th = document.createElement("th");
        th.scope = "row"; th.textContent = r.row; tr.appendChild(th);
        isolatedCell(tr, r.field);
        isolatedCell(tr, r.reason);
      });
      document.getElementById("failed-box").hidden = rows.length === 0;
      document.getElementById("no-failed").hidden = rows.length !== 0;
      more("failed-more", left);
    }
    // apartRows fills one of the lists of rows with nothing to fix in the
    // file, by its key: "other" (registered already with other content) or
    // "twice" (registered while the marketplace already held the SKU).
    function apartRows(key, rows, left) {
      var body = document.getElementById(key + "-rows").tBodies[0];
      body.textContent = "";
      rows.forEach(function (r) {
        var tr = body.insertRow(), th = document.createElement("th");
        th.scope = "row"; th.textContent = r.row; tr.appendChild(th);
        isolatedCell(tr, r.reason);
      });
      set("n-" + key, rows.length + (left || 0));
      document.getElementById(key).hidden = rows.length + (left || 0) === 0;
      more(key + "-more", left, "detail.rows.more.report"); // the fix file holds failed rows only
    }
    showETA();
    if (done) return;
    var tick = setInterval(showETA, 1000);
    var es = new EventSource(sec.dataset.events);
    function stop() { es.close(); clearInterval(tick); sec.dataset.stream = "ended"; }
    onSignedOut.push(stop);
    // The service ends the stream of a session that ended (signed out here
    // or in another tab, or expired).
    es.addEventListener("signedout", signedOut);
    es.addEventListener("progress", function (e) {
      var p = JSON.parse(e.data), bar = document.getElementById("bar");
      bar.max = p.total; bar.value = p.registered + p.already_registered + p.failed;
      set("n-registered", p.registered); set("n-already", p.already_registered);
      set("n-failed", p.to_fix || 0); set("n-waiting", p.rows_waiting); set("n-total", p.total);
      // The tiles add up to the total: the rows registered already with other content have their own.
      set("n-other-tile", p.other_content || 0); document.getElementById("tile-other").hidden = !p.other_content;
      set("percent", fmt(m["detail.percent"], p.percent));
      etaAt = p.eta ? new Date(p.eta) : null;
      etaText = p.eta_text || "";
      eta.dataset.eta = p.eta || "";
      eta.dataset.at = etaText;
      var fin = document.getElementById("finished");
      setText(fin, p.finished_text || "");
      fin.hidden = !p.finished_text;
      done = p.done;
      showOutage(p);
      showEnd(p);
      sec.dataset.done = String(done);
      sec.dataset.received = String(Number(sec.dataset.received || 0) + 1);
      if (p.failed_rows) { // the three lists come together, failed_rows always ([] when empty)
        failedRows(p.failed_rows, p.failed_rows_more || 0);
        apartRows("other", p.other_content_rows || [], p.other_content_rows_more || 0);
        apartRows("twice", p.twice_rows || [], p.twice_rows_more || 0);
      }
      showETA();
      if (done) { es.close(); clearInterval(tick); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { rememberZone(); sessionEvents(); cellLinks(); uploadPage(); progressPage(); historyPage(); });
})();
