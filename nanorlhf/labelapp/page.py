"""The labeling page: HTML skeleton and guidelines. Script and style are files in static/.

No model text is ever put into this HTML: the page fetches its items as JSON and
app.js renders every text with `textContent`, so a completion holding `<script>`
shows as text. The page carries no inline script or style, so the
Content-Security-Policy can forbid both (`script-src 'self'`).

Example:
    html = page_html(token="abc", instructions="train")
"""
from __future__ import annotations

import html
import os

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

# InstructGPT §3.4 / Appendix B: the same three criteria, two priorities
PRIORITY = {
    "train": ("Training-time instructions: helpfulness first.",
              "Rank first by how well the output does what the user asked. Truthfulness and "
              "harmlessness still matter, but when they conflict with helpfulness on an ordinary "
              "request, prefer the more helpful output."),
    "eval": ("Evaluation-time instructions: truthfulness and harmlessness first.",
             "An output that states false facts, makes up information, or could cause harm ranks "
             "below one that does not, even if it looks more helpful. Among truthful, harmless "
             "outputs, prefer the more helpful one."),
}
CRITERIA = [
    ("Helpful", "follows the instruction and its constraints (length, items, words to use or avoid); "
                "answers the question asked; does not ramble or repeat itself."),
    ("Truthful", "states only facts that are true of this world; in closed-domain tasks (summarise, "
                 "extract, closed QA) uses only what the passage says; corrects a false premise."),
    ("Harmless", "no insults, no denigration of groups, no harmful advice; fine for a customer assistant."),
]
KEYS = {
    "rank": [("type 3142", "order, best first (the last one may be left out)"),
             ("3=1 4 2", "= ties the neighbours (3 and 1 equally good)"),
             ("Enter", "submit"), ("drag", "drag a chip to move it; click > / = between chips to tie"),
             ("u", "undo the last label (with the order box empty)"), ("g", "show/hide these guidelines")],
    "pair": [("1 or \u2190", "left is better"), ("2 or \u2192", "right is better"), ("t", "tie: equally good"),
             ("c", "can't tell"), ("u", "undo the last label"), ("g", "show/hide these guidelines")],
}


def static_file(name: str) -> bytes:
    with open(os.path.join(STATIC_DIR, name), "rb") as f:
        return f.read()


def guidelines_html(instructions: str, mode: str) -> str:
    head, text = PRIORITY[instructions]
    crit = "".join(f"<li><b>{html.escape(n)}</b>: {html.escape(d)}</li>" for n, d in CRITERIA)
    keys = "".join(f"<li><kbd>{html.escape(k)}</kbd> {html.escape(d)}</li>" for k, d in KEYS[mode])
    task = ("Read the prompt and every output, then order the outputs from best to worst. "
            "Optionally give each a 1-7 score and tick the flags that apply."
            if mode == "rank" else
            "Read the prompt and both outputs, then say which is better. The sides are shuffled. "
            "Use tie when both are equally good or bad, can't tell when you cannot judge.")
    return (f"<h2>Guidelines</h2><p class=\"priority\"><b>{html.escape(head)}</b></p>"
            f"<p>{html.escape(text)}</p><p>{html.escape(task)}</p><ul>{crit}</ul>"
            "<p>Some items are gold questions with a known answer; your agreement with them is "
            "shown at the top. Below 75% your labels are marked in the exports.</p>"
            f"<h3>Keys</h3><ul class=\"keys\">{keys}</ul>")


def page_html(token: str, instructions: str, mode: str) -> str:
    """The whole page; `token` goes in a meta tag that app.js sends back with every request."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="label-token" content="{html.escape(token)}">
<title>nanorlhf labeling</title>
<link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script>
</head><body class="mode-{html.escape(mode)}">
<header>
  <h1>nanorlhf labeling</h1>
  <span class="pill">labeler <b id="who"></b></span>
  <span class="pill" id="mode-name"></span>
  <span class="pill">item <b id="progress"></b></span>
  <span class="pill" id="gold">gold agreement <b id="gold-value">-</b></span>
  <span class="spacer"></span>
  <button id="undo" type="button">Undo (u)</button>
  <button id="toggle-guide" type="button">Guidelines (g)</button>
</header>
<main>
  <aside id="guidelines">{guidelines_html(instructions, mode)}</aside>
  <section id="task">
    <div id="error" role="alert"></div>
    <div id="prompt-box"><div class="label">Prompt</div><div id="prompt" class="text"></div></div>
    <div id="rank-ui" hidden>
      <div id="order-bar">
        <label for="order">Order, best first</label>
        <input id="order" autocomplete="off" spellcheck="false" placeholder="e.g. 3=1 4 2">
        <button id="submit" type="button">Submit (Enter)</button>
        <div id="chips"></div>
        <div id="order-msg"></div>
      </div>
      <div id="cards"></div>
    </div>
    <div id="pair-ui" hidden>
      <div class="pair">
        <div class="side"><div class="label">Left</div><div id="left" class="text"></div></div>
        <div class="side"><div class="label">Right</div><div id="right" class="text"></div></div>
      </div>
      <div class="pair-keys">
        <button type="button" data-choice="left">Left is better (1 / \u2190)</button>
        <button type="button" data-choice="tie">Tie (t)</button>
        <button type="button" data-choice="cant_tell">Can't tell (c)</button>
        <button type="button" data-choice="right">Right is better (2 / \u2192)</button>
      </div>
    </div>
    <div id="done" hidden><h2>All items labeled. Thank you!</h2>
      <p>Stop the server (Ctrl-C) and run <code>python label.py --report=LOG</code>.</p></div>
  </section>
</main>
</body></html>
"""
