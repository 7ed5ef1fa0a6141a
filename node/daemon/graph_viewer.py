"""The graph viewer page (`/graphs/{digest}`): the optimized graph inline, with pan and zoom
(drag, the wheel, the + − and fit buttons, the keys + - 0) and a search by instruction name,
opcode, shape or the user's source that outlines every match and steps through them (Enter).

It is the one page that runs a script: this one, inline, allowed by its hash in the page's
own Content-Security-Policy, loading nothing from elsewhere (a verifier's machine may be
offline). Every other page runs none."""

from __future__ import annotations

import base64
import hashlib

from node.daemon.page_parts import e

VIEWER_SCRIPT = """(() => {
  const box = document.getElementById('viewer');
  const svg = box && box.querySelector('svg');
  if (!svg) return;
  const whole = svg.viewBox.baseVal;
  svg.removeAttribute('width'); svg.removeAttribute('height');
  const frame = svg.getBoundingClientRect();
  const aspect = frame.height / frame.width;
  let fit = {x: whole.x, y: whole.y, w: whole.width, h: whole.height};
  if (fit.h / fit.w < aspect) { const h = fit.w * aspect; fit = {...fit, y: fit.y - (h - fit.h) / 2, h}; }
  else { const w = fit.h / aspect; fit = {...fit, x: fit.x - (w - fit.w) / 2, w}; }
  let view = {...fit};
  const show = () => svg.setAttribute('viewBox', `${view.x} ${view.y} ${view.w} ${view.h}`);
  const toUser = (cx, cy) => new DOMPoint(cx, cy).matrixTransform(svg.getScreenCTM().inverse());
  const zoom = (factor, cx, cy) => {
    const p = toUser(cx, cy);
    view = {x: p.x - (p.x - view.x) * factor, y: p.y - (p.y - view.y) * factor, w: view.w * factor, h: view.h * factor};
    show();
  };
  const middle = () => { const r = svg.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
  const focus = (g) => {
    const r = g.getBoundingClientRect();
    const a = toUser(r.left, r.top), b = toUser(r.right, r.bottom);
    const w = Math.min(Math.max((b.x - a.x) * 5, 600), fit.w), h = w * aspect;
    view = {x: (a.x + b.x) / 2 - w / 2, y: (a.y + b.y) / 2 - h / 2, w, h};
    show();
  };
  svg.addEventListener('wheel', ev => { ev.preventDefault(); zoom(ev.deltaY < 0 ? 0.8 : 1.25, ev.clientX, ev.clientY); }, {passive: false});
  let drag = null;
  svg.addEventListener('pointerdown', ev => {
    drag = {x: ev.clientX, y: ev.clientY, view: {...view}, scale: svg.getScreenCTM().a};
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener('pointermove', ev => {
    if (!drag) return;
    view = {...drag.view, x: drag.view.x - (ev.clientX - drag.x) / drag.scale, y: drag.view.y - (ev.clientY - drag.y) / drag.scale};
    show();
  });
  svg.addEventListener('pointerup', () => { drag = null; });
  const reset = () => { view = {...fit}; show(); };
  document.getElementById('zoom-in').addEventListener('click', () => zoom(0.8, ...middle()));
  document.getElementById('zoom-out').addEventListener('click', () => zoom(1.25, ...middle()));
  document.getElementById('zoom-fit').addEventListener('click', reset);
  const nodes = [...svg.querySelectorAll('g.node, g.cluster')].map(g => {
    const title = g.querySelector('title').textContent.replace(/^cluster_/, '');
    const tips = [...g.querySelectorAll('a')].map(a => a.getAttribute('xlink:title') || '').join(' ');
    const words = [...g.querySelectorAll('text')].map(t => t.textContent).join(' ');
    return {g, title, key: `${title} ${words} ${tips}`.toLowerCase()};
  });
  const input = document.getElementById('find'), said = document.getElementById('found');
  let found = [], at = -1;
  input.addEventListener('input', () => {
    nodes.forEach(n => n.g.classList.remove('found'));
    const query = input.value.trim().toLowerCase();
    found = query ? nodes.filter(n => n.key.includes(query)) : [];
    found.forEach(n => n.g.classList.add('found'));
    at = -1;
    said.textContent = query ? `${found.length} found` + (found.length ? ': Enter goes to each' : '') : '';
  });
  input.addEventListener('keydown', ev => {
    if (ev.key !== 'Enter' || !found.length) return;
    at = (at + 1) % found.length;
    focus(found[at].g);
    said.textContent = `${at + 1} of ${found.length}: ${found[at].title}`;
  });
  document.addEventListener('keydown', ev => {
    if (ev.target === input) return;
    if (ev.key === '+' || ev.key === '=') zoom(0.8, ...middle());
    else if (ev.key === '-') zoom(1.25, ...middle());
    else if (ev.key === '0') reset();
  });
  show();
  const marked = box.dataset.highlight && nodes.find(n => n.title === box.dataset.highlight);
  if (marked) focus(marked.g);
  box.dataset.ready = 'yes';
})();"""

SCRIPT_HASH = base64.b64encode(hashlib.sha256(VIEWER_SCRIPT.encode()).digest()).decode()


def viewer_policy(base_policy: str) -> str:
    """The viewer page's Content-Security-Policy: the pages' own, plus this one script."""
    return base_policy.replace("default-src 'none';", f"default-src 'none'; script-src 'sha256-{SCRIPT_HASH}';", 1)


def viewer_body(svg: str, highlight: str | None) -> str:
    """The viewer's toolbar, the inline SVG (`svg`, an element of the page) and its script."""
    marked = f" data-highlight='{e(highlight)}'" if highlight else ""
    toolbar = (
        "<p class=toolbar><input id=find type=search placeholder='find: a name, an opcode, a shape, your source' "
        "aria-label='find an instruction' size=40> <span id=found class=note></span> "
        "<button id=zoom-in title='zoom in (+)'>+</button><button id=zoom-out title='zoom out (-)'>&minus;</button>"
        "<button id=zoom-fit title='the whole graph (0)'>fit</button> "
        "<span class=note>drag to pan, the wheel zooms</span></p>"
    )
    return f"{toolbar}<div id=viewer class=viewer{marked}>{svg}</div><script>{VIEWER_SCRIPT}</script>"
