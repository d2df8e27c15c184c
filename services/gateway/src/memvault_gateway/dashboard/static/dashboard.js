// memvault dashboard: small enhancements; every page works without this file.
"use strict";
document.documentElement.classList.add("js");

// The vault and language pickers open their choice at once (their buttons stay for pages without script).
for (const select of document.querySelectorAll("select.autosubmit")) {
  select.addEventListener("change", () => select.form.submit());
}

// Review queue keys: j / k move between proposals, x ticks, a approves, r approves & replaces, d rejects.
const proposals = Array.from(document.querySelectorAll(".proposal"));
let current = -1;
function focusProposal(index) {
  if (!proposals.length) return;
  current = Math.max(0, Math.min(proposals.length - 1, index));
  proposals.forEach((p, i) => p.classList.toggle("current", i === current));
  proposals[current].focus();
}
function press(action) {
  if (current < 0) return;
  const button = proposals[current].querySelector(`button[data-action="${action}"]`);
  if (button) button.click();
}
document.addEventListener("keydown", (event) => {
  if (!proposals.length || event.ctrlKey || event.metaKey || event.altKey) return;
  const typing = event.target.closest && event.target.closest("input[type=text], input:not([type]), textarea, select");
  if (typing) return;
  const keys = {
    j: () => focusProposal(current + 1),
    k: () => focusProposal(current - 1),
    x: () => { const box = current >= 0 && proposals[current].querySelector("input[type=checkbox]"); if (box) box.checked = !box.checked; },
    a: () => press("approve"),
    r: () => press("replace"),
    d: () => press("reject"),
  };
  if (keys[event.key]) { event.preventDefault(); keys[event.key](); }
});

// Copy buttons (shown only with script): copy the text of the element they name.
for (const button of document.querySelectorAll("button[data-copy]")) {
  button.addEventListener("click", async () => {
    const source = document.getElementById(button.dataset.copy);
    if (!source) return;
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      button.textContent = button.dataset.copied || "✓";
    } catch {
      window.getSelection().selectAllChildren(source);
    }
  });
}

// Downloads with a progress line (the archive export): read the stream, say how much has arrived, then
// save it. Without script the link is a plain download and the browser shows its own progress.
for (const link of document.querySelectorAll("a[data-progress]")) {
  link.addEventListener("click", async (event) => {
    const line = document.getElementById(link.dataset.progress);
    if (!line || !window.ReadableStream) return;
    event.preventDefault();
    const say = (template, bytes) => { line.textContent = template.replace("%(mb)s", (bytes / 1e6).toFixed(1)); };
    let received = 0;
    try {
      const response = await fetch(link.href, { credentials: "same-origin" });
      if (!response.ok || !response.body) { window.location.href = link.href; return; }
      const reader = response.body.getReader();
      const parts = [];
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parts.push(value);
        received += value.length;
        say(link.dataset.received, received);
      }
      const disposition = response.headers.get("Content-Disposition") || "";
      const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || "memvault-archive.jsonl";
      const url = URL.createObjectURL(new Blob(parts, { type: "application/x-ndjson" }));
      const save = document.createElement("a");
      save.href = url;
      save.download = name;
      document.body.appendChild(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      say(link.dataset.done, received);
    } catch {
      say(link.dataset.failed, received);
    }
  });
}
