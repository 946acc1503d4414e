// The page works without this file: it adds copy buttons, and shows only the chosen kind's
// settings on the monitor form (without it, every kind's show and the chosen one's count).
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

function showKindSettings() {
  const kind = document.querySelector("select#kind");
  if (!kind) return;
  for (const fieldset of document.querySelectorAll("fieldset.kind-settings")) {
    fieldset.hidden = fieldset.dataset.kind !== kind.value;
  }
}
document.addEventListener("change", (event) => {
  if (event.target.matches("select#kind")) showKindSettings();
});
document.addEventListener("DOMContentLoaded", showKindSettings);
