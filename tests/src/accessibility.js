// Accessibility problems of the page as shown, as sentences (empty: none found). What a
// screen-reader or keyboard user would trip on first, checked by hand rather than with a
// downloaded rule set: every control has a label, every image and link a name, ids are unique,
// the page says its language and has a main landmark, text contrast reaches WCAG AA, no
// element takes focus out of order, and the page does not scroll sideways on a narrow screen.
const problems = [];
const describe = (el) =>
  el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
  (el.getAttribute("name") ? "[name=" + el.getAttribute("name") + "]" : "") +
  (el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : "");
const visible = (el) => {
  const style = getComputedStyle(el);
  return el.getClientRects().length > 0 && style.visibility !== "hidden";
};
const accessibleName = (el) => {
  const labelledBy = el.getAttribute("aria-labelledby");
  if (labelledBy) return labelledBy.split(" ").map((id) => document.getElementById(id)?.textContent || "").join(" ").trim();
  if (el.getAttribute("aria-label")) return el.getAttribute("aria-label").trim();
  if (el.labels && el.labels.length) return Array.from(el.labels).map((l) => l.textContent).join(" ").trim();
  if (el.getAttribute("title")) return el.getAttribute("title").trim();
  return (el.textContent || el.value || "").trim();
};

if (!document.documentElement.lang) problems.push("the page does not say its language (html lang)");
if (!document.querySelector("main")) problems.push("no main landmark");
if (!document.title.trim()) problems.push("no title");

for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
  const labelled = (el.labels && el.labels.length) || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
  if (!labelled) problems.push("no label: " + describe(el));
}
for (const el of document.querySelectorAll("a[href], button, [role=img], svg[role=img]")) {
  if (visible(el) && !accessibleName(el)) problems.push("no accessible name: " + describe(el));
}
const seen = new Set();
for (const el of document.querySelectorAll("[id]")) {
  if (seen.has(el.id)) problems.push("duplicate id: " + el.id);
  seen.add(el.id);
}
for (const el of document.querySelectorAll("[aria-describedby]")) {
  for (const id of el.getAttribute("aria-describedby").split(" ")) {
    if (!document.getElementById(id)) problems.push("describedby points nowhere: " + describe(el) + " -> " + id);
  }
}
for (const el of document.querySelectorAll("[tabindex]")) {
  if (Number(el.getAttribute("tabindex")) > 0) problems.push("tabindex out of order: " + describe(el));
}

// WCAG 2 contrast of each visible text node's colour against the first opaque background behind it.
const channel = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
const rgba = (text) => (text.match(/[\d.]+/g) || []).map(Number);
const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
const background = (el) => {
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const [r, g, b, a] = rgba(getComputedStyle(node).backgroundColor);
    if (a === undefined || a > 0.9) return [r, g, b];
  }
  return [255, 255, 255];
};
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const checked = new Set();
while (walker.nextNode()) {
  const el = walker.currentNode.parentElement;
  if (!el || checked.has(el) || !walker.currentNode.textContent.trim() || !visible(el)) continue;
  if (el.closest("svg, option, [aria-hidden=true], .skip")) continue;
  checked.add(el);
  const style = getComputedStyle(el);
  const fg = luminance(rgba(style.color));
  const bg = luminance(background(el));
  const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
  if (ratio < (large ? 3 : 4.5)) problems.push("contrast " + ratio.toFixed(2) + ": " + describe(el) + " '" + el.textContent.trim().slice(0, 40) + "'");
}

if (document.documentElement.scrollWidth > window.innerWidth + 1) {
  problems.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " px wide in a " + window.innerWidth + " px window");
}
return problems;
