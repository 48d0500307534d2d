// Building and updating the page's elements. Nothing here writes markup
// as text: elements are made with createElement (createElementNS for a
// chart's SVG) and filled with text nodes, so nothing a daemon sends can
// become HTML, and no inline style attribute is ever written (the page's
// Content-Security-Policy forbids them; a value that must vary goes
// through el.style.setProperty).

// h makes an element. attrs: "class", "text", "dataset" (an object),
// "on" (event name to handler), any other key is set as an attribute
// (false, null and undefined are skipped). Children may be elements,
// strings, numbers, arrays of them, or null.
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

const SVG_NS = 'http://www.w3.org/2000/svg';

// svg makes an SVG element, with attrs and children as h takes them (a
// chart's shapes, drawn as elements like the rest of the page).
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

function fill(el, attrs, children) {
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'dataset') for (const [dk, dv] of Object.entries(v)) { if (dv !== undefined && dv !== null) el.dataset[dk] = String(dv); }
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// reconcile makes container's children the rendering of items, in order,
// reusing the element of an item whose key and signature are unchanged:
// an unchanged card keeps its element, so its animations do not restart
// and the page does not rebuild what it already shows. render(item) makes
// a new element; sig(item) is a string that changes whenever the element
// would.
export function reconcile(container, items, key, sig, render) {
  const old = new Map();
  for (const el of Array.from(container.children)) {
    if (el.dataset.key !== undefined) old.set(el.dataset.key, el);
  }
  const wanted = [];
  for (const item of items) {
    const k = String(key(item));
    const s = sig(item);
    let el = old.get(k);
    if (!el || el.dataset.sig !== s) {
      el = render(item);
      el.dataset.key = k;
      el.dataset.sig = s;
    }
    old.delete(k);
    wanted.push(el);
  }
  for (const el of old.values()) el.remove();
  // Move or insert in order, touching only what is out of place.
  let at = container.firstElementChild;
  for (const el of wanted) {
    if (el === at) { at = at.nextElementSibling; continue; }
    container.insertBefore(el, at);
  }
  // Whatever is left (an earlier placeholder) is not part of the list.
  while (at) { const next = at.nextElementSibling; at.remove(); at = next; }
}
