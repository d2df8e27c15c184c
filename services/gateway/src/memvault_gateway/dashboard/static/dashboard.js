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
