// The page works without this file: it adds copy buttons, and shows only the fields of the
// chosen kind on the monitor and channel forms (without it, every kind's show, and only the
// chosen kind's count).
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
