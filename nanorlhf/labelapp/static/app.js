// nanorlhf labeling page. Every model text goes through textContent: never innerHTML.
// Pure helpers (parseOrder, formatOrder, moveTo) are exposed on window.labelApp for tests.
"use strict";

// ---------------------------------------------------------------------------
// the order box: "3142" or "3=1 4 2" (1-based, best first) -> groups of 0-based indices

function parseOrder(text, k) {
  const tiers = [], seen = new Set();
  let tie = false;
  for (const ch of text) {
    if (ch >= "1" && ch <= "9") {
      const i = Number(ch) - 1;
      if (i >= k) return {error: `${ch} is not an output (1-${k})`, tiers};
      if (seen.has(i)) return {error: `${ch} appears twice`, tiers};
      seen.add(i);
      if (tie && tiers.length) tiers[tiers.length - 1].push(i); else tiers.push([i]);
      tie = false;
    } else if (ch === "=") {
      if (!tiers.length) return {error: "= ties two outputs: put it between them", tiers};
      tie = true;
    } else if (!" ,>".includes(ch)) {
      return {error: `unexpected '${ch}': type output numbers, spaces and =`, tiers};
    }
  }
  const missing = [...Array(k).keys()].filter(i => !seen.has(i));
  if (!tie && missing.length === 1 && tiers.length) {   // the last one may be left out
    return {tiers, implied: missing[0], ranking: [...tiers, [missing[0]]], missing: []};
  }
  return {tiers, missing, ranking: missing.length || tie ? null : tiers};
}

function formatOrder(tiers) {
  return tiers.map(t => t.map(i => i + 1).join("=")).join(" ");
}

// Move output `i` next to output `target` ("before" | "after" its group | "tie" into it); -1 = unrank.
function moveTo(tiers, i, target, where) {
  let out = tiers.map(t => t.filter(x => x !== i)).filter(t => t.length);
  if (target < 0) return out;
  const at = out.findIndex(t => t.includes(target));
  if (at < 0) return out.concat([[i]]);
  if (where === "tie") out[at].push(i);
  else out.splice(where === "before" ? at : at + 1, 0, [i]);
  return out;
}

window.labelApp = {parseOrder, formatOrder, moveTo};

// ---------------------------------------------------------------------------
// talking to the server

const TOKEN = document.querySelector('meta[name="label-token"]').content;
const $ = id => document.getElementById(id);
let state = null, shownAt = 0, busy = false, likert = [], flags = [];

async function api(path, body) {
  const opts = {headers: {"X-Token": TOKEN}, cache: "no-store"};
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const data = await r.json();
  if (data.state || (r.ok && body === undefined)) render(data.state || data);
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

async function send(path, body) {
  if (busy) return;
  busy = true;
  $("error").textContent = "";
  try { await api(path, body); } catch (e) { $("error").textContent = e.message; } finally { busy = false; }
}

function submitRank() {
  const p = parseOrder($("order").value, state.item.completions.length);
  if (!p.ranking) { $("order-msg").textContent = p.error || "rank every output first"; return; }
  send("/api/label", {item_id: state.item.id, ranking: p.ranking, likert, flags,
                      ms: Math.round(performance.now() - shownAt)});
}

function submitPair(choice) {
  if (state && state.item) send("/api/label", {item_id: state.item.id, choice,
                                               ms: Math.round(performance.now() - shownAt)});
}

// ---------------------------------------------------------------------------
// rendering (textContent only)

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function render(s) {
  const newItem = !state || !s.item || !state.item || state.item.id !== s.item.id;
  state = s;
  $("who").textContent = s.labeler;
  $("mode-name").textContent = s.mode === "rank" ? "ranking (InstructGPT)" : "pairwise (2017 protocol)";
  const p = s.progress;
  $("progress").textContent = `${Math.min(p.done + (s.item ? 1 : 0), p.total)} / ${p.total}`;
  const g = s.gold;
  $("gold-value").textContent = g.total ? `${g.agree}/${g.total} (${Math.round(100 * g.share)}%)` : "-";
  $("gold").classList.toggle("low", g.below_cutoff);
  $("undo").disabled = !s.can_undo;
  $("done").hidden = !!s.item;
  $("prompt-box").hidden = !s.item;
  $("rank-ui").hidden = !(s.item && s.mode === "rank");
  $("pair-ui").hidden = !(s.item && s.mode === "pair");
  if (!s.item || !newItem) return;
  $("prompt").textContent = s.item.prompt;
  shownAt = performance.now();
  if (s.mode === "pair") {
    $("left").textContent = s.item.completions[0];
    $("right").textContent = s.item.completions[1];
  } else {
    renderCards(s.item.completions, s.flags);
    $("order").value = "";
    updateOrder();
    $("order").focus();
  }
}

function renderCards(texts, flagNames) {
  likert = texts.map(() => null);
  flags = texts.map(() => []);
  const cards = $("cards");
  cards.replaceChildren();
  texts.forEach((text, i) => {
    const card = el("div", "card");
    card.id = `card-${i}`;
    const head = el("div", "card-head");
    head.append(el("span", "badge", String(i + 1)), el("span", "place", ""));
    const scores = el("div", "likert");
    scores.append(el("span", "hint", "1-7"));
    for (let v = 1; v <= 7; v++) {
      const b = el("button", "score", String(v));
      b.type = "button";
      b.tabIndex = -1;
      b.addEventListener("click", () => {
        likert[i] = likert[i] === v ? null : v;
        scores.querySelectorAll(".score").forEach((x, n) => x.classList.toggle("on", likert[i] === n + 1));
      });
      scores.append(b);
    }
    head.append(scores);
    const box = el("details", "flags");
    const summary = el("summary", "", "flags");
    box.append(summary);
    for (const [key, label] of flagNames) {
      const row = el("label", "flag");
      const cb = el("input");
      cb.type = "checkbox";
      cb.addEventListener("change", () => {
        flags[i] = cb.checked ? flags[i].concat([key]) : flags[i].filter(f => f !== key);
        summary.textContent = flags[i].length ? `flags (${flags[i].length})` : "flags";
      });
      row.append(cb, el("span", "", label));
      box.append(row);
    }
    card.append(head, el("div", "text", text), box);
    cards.append(card);
  });
}

function chip(i, implied) {
  const c = el("span", implied ? "chip implied" : "chip", String(i + 1));
  c.draggable = true;
  c.dataset.i = i;
  c.addEventListener("dragstart", e => e.dataTransfer.setData("text/plain", String(i)));
  c.addEventListener("dragover", e => e.preventDefault());
  c.addEventListener("drop", e => {
    e.preventDefault();
    const r = c.getBoundingClientRect();
    const where = e.clientX < r.left + r.width / 2 ? "before" : "after";
    setTiers(moveTo(currentTiers(), Number(e.dataTransfer.getData("text/plain")), i, where));
  });
  return c;
}

function currentTiers() {
  const p = parseOrder($("order").value, state.item.completions.length);
  return p.ranking || p.tiers;
}

function setTiers(tiers) {
  $("order").value = formatOrder(tiers);
  updateOrder();
  $("order").focus();
}

function separator(tiers, t, n, tied) {   // click: ">" <-> "="
  const s = el("span", "sep", tied ? "=" : ">");
  s.title = tied ? "click to untie" : "click to tie";
  s.addEventListener("click", () => {
    const next = tiers.map(x => x.slice());
    if (tied) next.splice(t, 1, next[t].slice(0, n), next[t].slice(n));
    else next.splice(t, 2, next[t].concat(next[t + 1]));
    setTiers(next);
  });
  return s;
}

function updateOrder() {
  if (!state || !state.item || state.mode !== "rank") return;
  const k = state.item.completions.length;
  const p = parseOrder($("order").value, k);
  const tiers = p.ranking || p.tiers, chips = $("chips");
  chips.replaceChildren();
  tiers.forEach((tier, t) => {
    if (t) chips.append(separator(tiers, t - 1, 0, false));
    tier.forEach((i, n) => {
      if (n) chips.append(separator(tiers, t, n, true));
      chips.append(chip(i, i === p.implied));
    });
  });
  const rest = el("span", "unranked");
  rest.addEventListener("dragover", e => e.preventDefault());
  rest.addEventListener("drop", e => { e.preventDefault(); setTiers(moveTo(tiers, Number(e.dataTransfer.getData("text/plain")), -1)); });
  (p.missing || []).forEach(i => rest.append(chip(i, false)));
  chips.append(rest);
  const place = {};
  if (p.ranking) p.ranking.forEach((tier, t) => tier.forEach(i => { place[i] = t + 1; }));
  for (let i = 0; i < k; i++) $(`card-${i}`).querySelector(".place").textContent = place[i] ? `#${place[i]}` : "";
  $("order-msg").textContent = p.error || (p.ranking
    ? (p.implied !== undefined ? `${p.implied + 1} is last. Enter to submit.` : "Enter to submit.")
    : `rank ${p.missing.length} more`);
  $("order-msg").classList.toggle("bad", !!p.error);
  $("submit").disabled = !p.ranking;
}

// ---------------------------------------------------------------------------
// keys and buttons

function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey || !state) return;
  const inOrder = e.target === $("order");
  if (inOrder) {
    if (e.key === "Enter") { e.preventDefault(); submitRank(); }
    else if (e.key === "Escape") $("order").blur();
    else if (e.key.toLowerCase() === "u" && !$("order").value) { e.preventDefault(); send("/api/undo", {}); }
    return;
  }
  if (e.target.tagName === "INPUT" || e.target.tagName === "TEXTAREA") return;
  const key = e.key.toLowerCase();
  if (key === "u") send("/api/undo", {});
  else if (key === "g") $("guidelines").hidden = !$("guidelines").hidden;
  else if (state.mode === "pair") {
    const choice = {"1": "left", arrowleft: "left", "2": "right", arrowright: "right", t: "tie", c: "cant_tell"}[key];
    if (choice) { e.preventDefault(); submitPair(choice); }
  } else if (state.item && /^[1-9= ]$/.test(e.key)) {
    $("order").focus();   // typing anywhere goes to the order box
  } else if (key === "enter" && state.item && e.target.tagName !== "BUTTON") submitRank();
}

function init() {
  document.addEventListener("keydown", onKey);
  $("order").addEventListener("input", updateOrder);
  $("submit").addEventListener("click", submitRank);
  $("undo").addEventListener("click", () => send("/api/undo", {}));
  $("toggle-guide").addEventListener("click", () => { $("guidelines").hidden = !$("guidelines").hidden; });
  document.querySelectorAll("[data-choice]").forEach(b => b.addEventListener("click", () => submitPair(b.dataset.choice)));
  api("/api/state").catch(e => { $("error").textContent = e.message; });
}

init();
