// bulkreg seller pages: the drop zone and the in-place check on the upload
// page, and the live progress of an upload over server-sent events. The
// pages work without it; this only saves a round trip and a reload.
"use strict";

(function () {
  function messages() {
    var el = document.getElementById("i18n");
    return el ? JSON.parse(el.textContent) : {};
  }
  function fmt(s) {
    var args = Array.prototype.slice.call(arguments, 1), i = 0;
    return s.replace(/%[ds%]/g, function (m) { return m === "%%" ? "%" : String(args[i++]); });
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
    check.addEventListener("click", function (e) {
      if (!input.files.length) return; // the browser says the file is required
      e.preventDefault();
      var label = check.textContent;
      check.disabled = true;
      check.textContent = check.dataset.working || label;
      var token = document.querySelector('meta[name="csrf-token"]');
      fetch("/upload/check", {
        method: "POST", body: new FormData(form), credentials: "same-origin",
        headers: { "X-CSRF-Token": token ? token.content : "", "X-Fragment": "1" }
      }).then(function (r) { return r.text(); }).then(function (html) {
        result.innerHTML = html;
        var title = document.getElementById("check-title");
        if (title) title.focus();
      }).catch(function () { form.action = "/upload/check"; form.submit(); })
        .finally(function () { check.disabled = false; check.textContent = label; });
    });
  }

  // Upload detail: counts, bar, finish estimate and failed rows as the
  // events come; the estimate's "in about …" ticks every second.
  function progressPage() {
    var sec = document.getElementById("progress");
    if (!sec || !window.EventSource) return;
    var m = messages();
    var eta = document.getElementById("eta"), etaAt = eta.dataset.eta ? new Date(eta.dataset.eta) : null;
    var done = sec.dataset.done === "true";
    var clock = new Intl.DateTimeFormat(document.documentElement.lang, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    function dur(ms) {
      var s = Math.max(0, Math.round(ms / 1000));
      return s < 60 ? fmt(m["dur.sec"], s) : fmt(m["dur.min"], Math.floor(s / 60), s % 60);
    }
    function showETA() {
      if (done) { eta.textContent = m["detail.done"]; return; }
      if (!etaAt) { eta.textContent = m["detail.eta.none"]; return; }
      var left = etaAt - Date.now();
      eta.textContent = left < 1000 ? m["detail.eta.now"] : fmt(m["detail.eta"], dur(left), clock.format(etaAt));
    }
    function set(id, v) { document.getElementById(id).textContent = v; }
    function failedRows(rows) {
      var table = document.getElementById("failed"), body = table.tBodies[0];
      body.textContent = "";
      rows.forEach(function (r) {
        var tr = body.insertRow(), th = document.createElement("th");
        th.scope = "row"; th.textContent = r.row; tr.appendChild(th);
        tr.insertCell().textContent = r.field || "";
        tr.insertCell().textContent = r.reason || "";
      });
      table.hidden = rows.length === 0;
      document.getElementById("no-failed").hidden = rows.length !== 0;
    }
    showETA();
    if (done) return;
    var tick = setInterval(showETA, 1000);
    var es = new EventSource(sec.dataset.events);
    es.addEventListener("progress", function (e) {
      var p = JSON.parse(e.data), bar = document.getElementById("bar");
      bar.max = p.total; bar.value = p.registered + p.already_registered + p.failed;
      set("n-registered", p.registered); set("n-already", p.already_registered);
      set("n-failed", p.failed); set("n-waiting", p.rows_waiting); set("n-total", p.total);
      set("percent", fmt(m["detail.percent"], p.percent));
      set("state", m["state." + (p.done ? "done" : p.state)] || p.state);
      etaAt = p.eta ? new Date(p.eta) : null;
      eta.dataset.eta = p.eta || "";
      done = p.done;
      sec.dataset.done = String(done);
      sec.dataset.received = String(Number(sec.dataset.received || 0) + 1);
      if (p.failed_rows) failedRows(p.failed_rows);
      showETA();
      if (done) { es.close(); clearInterval(tick); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { uploadPage(); progressPage(); });
})();
