// The page works without this file: it adds copy buttons, asks before deleting (forms with
// `data-confirm`; the page's Content Security Policy allows no inline handlers), and shows only
// the fields of the chosen kind on the monitor and channel forms (without it, every kind's
// show, and only the chosen kind's count).
// A refreshing region that holds a form waits while one of its fields has the focus.
document.addEventListener("htmx:beforeRequest", (event) => {
  const region = event.detail.elt;
  if (region.hasAttribute("data-hold-while-focused") && region.contains(document.activeElement)) {
    event.preventDefault();
  }
});
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !confirm(question)) event.preventDefault();
});

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(() => {
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  });
});

function showKindFields() {
  const kind = document.querySelector("select.kind-choice");
  if (!kind) return;
  for (const fieldset of document.querySelectorAll("fieldset[data-kinds]")) {
    fieldset.hidden = !fieldset.dataset.kinds.split(" ").includes(kind.value);
  }
}
document.addEventListener("change", (event) => {
  if (event.target.matches("select.kind-choice")) showKindFields();
});
document.addEventListener("DOMContentLoaded", showKindFields);
