// The MAGE report: reads the run's data from <script id="mage-data"> and draws every
// section with the DOM and SVG only (no library, nothing fetched).
"use strict";

const DATA = JSON.parse(document.getElementById("mage-data").textContent);
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
const Z95 = 1.96;  // a 95% normal confidence interval is the mean +- 1.96 standard errors

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  return node;
}

function fmt(value, signed = true) {
  if (value === null || value === undefined || Number.isNaN(value)) return "-";
  return (signed && value >= 0 ? "+" : "") + value.toFixed(3);
}

function section(id, title) {
  const node = el("section", { id }, el("h2", { text: title }));
  document.getElementById("report").append(node);
  document.getElementById("sections").append(el("a", { href: "#" + id, text: title }));
  return node;
}

// ------------------------------------------------------------------ charts
const HLINE_DASHES = ["6 3", "2 3", "10 4 2 4", "1 5"];

// A legend's sample of a line: its colour and dash pattern.
function swatch(color, dash, width = 1.4) {
  const sample = svg("svg", { width: 26, height: 10, class: "swatch" });
  sample.append(svg("line", { x1: 1, x2: 25, y1: 5, y2: 5, stroke: color, "stroke-width": width, "stroke-dasharray": dash }));
  return sample;
}
// series: [{name, x: [], y: [], lo: [] | null, hi: [] | null, dashed, color}]; hlines: [{name, y}]
function lineChart({ title, series, hlines = [], xlabel, ylabel }) {
  const width = 460, height = 260, left = 56, right = 12, top = 26, bottom = 40;
  const xs = series.flatMap((s) => s.x);
  const ys = series.flatMap((s) => [...s.y, ...(s.lo || []), ...(s.hi || [])]).concat(hlines.map((h) => h.y));
  const finite = ys.filter((v) => Number.isFinite(v));
  let [y0, y1] = [Math.min(...finite), Math.max(...finite)];
  if (!finite.length) [y0, y1] = [0, 1];
  if (y0 === y1) [y0, y1] = [y0 - 0.5, y1 + 0.5];
  const pad = (y1 - y0) * 0.06;
  [y0, y1] = [y0 - pad, y1 + pad];
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  if (x0 === x1) [x0, x1] = [x0 - 0.5, x1 + 0.5];
  const X = (x) => left + ((x - x0) / (x1 - x0)) * (width - left - right);
  const Y = (y) => top + (1 - (y - y0) / (y1 - y0)) * (height - top - bottom);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img" });
  chart.append(Object.assign(svg("text", { x: left, y: 16, class: "chart-title" }), { textContent: title }));
  for (let k = 0; k <= 4; k++) {
    const value = y0 + ((y1 - y0) * k) / 4;
    chart.append(svg("line", { x1: left, x2: width - right, y1: Y(value), y2: Y(value), class: "grid" }));
    chart.append(Object.assign(svg("text", { x: left - 6, y: Y(value) + 4, class: "tick", "text-anchor": "end" }),
      { textContent: value.toFixed(2) }));
  }
  const xticks = [...new Set(xs)].sort((a, b) => a - b);
  const step = Math.max(1, Math.ceil(xticks.length / 8));
  xticks.filter((_, i) => i % step === 0).forEach((x) => chart.append(Object.assign(
    svg("text", { x: X(x), y: height - bottom + 16, class: "tick", "text-anchor": "middle" }), { textContent: x })));
  chart.append(Object.assign(svg("text", { x: (left + width) / 2, y: height - 6, class: "axis", "text-anchor": "middle" }),
    { textContent: xlabel }));
  chart.append(Object.assign(svg("text", { x: 12, y: top + (height - top - bottom) / 2, class: "axis",
    transform: `rotate(-90 12 ${top + (height - top - bottom) / 2})`, "text-anchor": "middle" }), { textContent: ylabel }));
  const legend = el("div", { class: "legend" });
  hlines.forEach((line, i) => {
    const dash = HLINE_DASHES[i % HLINE_DASHES.length];
    chart.append(svg("line", { x1: left, x2: width - right, y1: Y(line.y), y2: Y(line.y), stroke: "#555",
      "stroke-dasharray": dash, class: "hline" }));
    legend.append(el("span", { class: "key" }, swatch("#555", dash), ` ${line.name} ${fmt(line.y)}`));
  });
  const spread = series.filter((s) => s.lo).length;
  series.forEach((s, i) => {
    const color = s.color || COLORS[i % COLORS.length];
    // curves with intervals side by side, so that the intervals do not hide each other
    const shift = s.lo ? (i - (spread - 1) / 2) * 4 : 0;
    const at = (x) => X(x) + shift;
    const points = s.x.map((x, k) => [x, s.y[k], k]).filter(([, y]) => Number.isFinite(y));
    chart.append(svg("polyline", { points: points.map(([x, y]) => `${at(x)},${Y(y)}`).join(" "), fill: "none",
      stroke: color, "stroke-width": 2, "stroke-dasharray": s.dashed ? "5 3" : "none" }));
    points.forEach(([x, y, k]) => {
      if (s.lo && s.hi) chart.append(svg("line", { x1: at(x), x2: at(x), y1: Y(s.lo[k]), y2: Y(s.hi[k]), stroke: color }));
      if (points.length <= 30) chart.append(svg("circle", { cx: at(x), cy: Y(y), r: 3, fill: color }));
    });
    legend.append(el("span", { class: "key", style: `color:${color}` }, swatch(color, s.dashed ? "5 3" : "none", 2),
      " " + s.name + (s.lo ? " (95% CI)" : "")));
  });
  return el("figure", { class: "figure" }, chart, legend);
}

// ------------------------------------------------------------------ training
const TRAINING_GROUPS = [
  ["Return by episode index", (k) => /^return_ep\d+$/.test(k), "return"],
  ["Entropy", (k) => k === "entropy", "nats per token"],
  ["KL", (k) => k === "approx_kl" || k === "kl", "KL"],
  ["Exploitability", (k) => k === "exploitability" || k === "nash_conv", "chips"],
  ["Invalid answers", (k) => k === "invalid_rate", "share of turns"],
];

function drawTraining() {
  const rows = DATA.metrics || [];
  if (!rows.length) return;
  const node = section("training", "Training");
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const grid = el("div", { class: "figures" });
  for (const [title, match, ylabel] of TRAINING_GROUPS) {
    const chosen = keys.filter(match).sort();
    if (!chosen.length) continue;
    const series = chosen.map((key) => {
      const have = rows.filter((r) => key in r);
      return { name: key, x: have.map((r) => r.iteration), y: have.map((r) => r[key]) };
    });
    const figure = lineChart({ title, series, xlabel: "iteration", ylabel });
    figure.setAttribute("data-metric-group", title);
    grid.append(figure);
  }
  node.append(el("p", { text: `${rows.length} iterations logged in metrics.jsonl.` }), grid);
}

// ------------------------------------------------------------------ evaluation
const ORACLES = [
  ["best_response_value", "best response"],
  ["equilibrium_value", "equilibrium"],
  ["instance_optimal_value", "deal-known"],
];

function ci(result, k) {
  return Z95 * (result.stderr_return_by_episode[k] || 0);
}

function evaluationTable(name, report) {
  const n = report.num_episodes;
  const head = el("tr", {}, el("th", { text: "opponent" }));
  for (let k = 0; k < n; k++) head.append(el("th", { text: `ep${k + 1} return (95% CI)` }));
  ["win ep" + n, "invalid", "best response", "equilibrium", "deal-known", "Bayes ep" + n].forEach(
    (t) => head.append(el("th", { text: t })));
  const table = el("table", { class: "eval", "data-agent": name }, el("thead", {}, head));
  const body = el("tbody");
  for (const [opponent, r] of Object.entries(report.opponents)) {
    const row = el("tr", { "data-opponent": opponent }, el("th", { text: opponent }));
    r.mean_return_by_episode.forEach((mean, k) => row.append(el("td", {
      class: "ret", "data-episode": k + 1, "data-mean": mean, "data-ci": ci(r, k),
      text: `${fmt(mean)} \u00B1 ${ci(r, k).toFixed(3)}`,
    })));
    row.append(el("td", { class: "win", "data-value": r.win_rate_by_episode[n - 1], text: r.win_rate_by_episode[n - 1].toFixed(2) }));
    row.append(el("td", { class: "invalid", "data-value": r.invalid_action_rate, text: r.invalid_action_rate.toFixed(3) }));
    for (const [key] of ORACLES) {
      const value = r[key];
      const approx = key === "best_response_value" && value !== null && r.best_response_exact === false;
      row.append(el("td", { class: "oracle", "data-key": key, "data-value": value === null ? "" : value,
        text: value === null || value === undefined ? "-" : fmt(value) + (approx ? ` \u00B1${(Z95 * r.best_response_stderr).toFixed(3)}~` : "") }));
    }
    const bayes = (report.bayes_by_episode || {})[opponent];
    row.append(el("td", { class: "oracle", "data-key": "bayes", "data-value": bayes ? bayes[n - 1] : "",
      text: bayes ? fmt(bayes[n - 1]) : "-" }));
    body.append(row);
  }
  table.append(body);
  return table;
}

function drawEvaluation() {
  const evaluations = Object.entries(DATA.evaluations || {});
  if (!evaluations.length) return;
  const node = section("evaluation", "Evaluation");
  node.append(el("p", { class: "note", text: "Mean return by episode index with its 95% confidence interval " +
    "(1.96 standard errors), beside the oracle values: the best response to the opponent, the equilibrium value, the " +
    "deal-known ceiling (repeated deals: the best return knowing the deal) and the Bayes-optimal adaptive agent " +
    "(fresh deals). A ~ marks a Monte Carlo estimate." }));
  for (const [name, report] of evaluations) {
    node.append(el("h3", { text: `${name} on ${report.env_id} (${report.file}; seed ${report.seed}, ` +
      `${Object.values(report.opponents)[0]?.meta_episodes ?? 0} meta-episodes per opponent)` }));
    node.append(evaluationTable(name, report));
    const extra = [];
    if (report.best_nonadaptive_value !== undefined && report.best_nonadaptive_value !== null)
      extra.push(`best non-adaptive value against the training population ${fmt(report.best_nonadaptive_value)}`);
    if (report.bayes_adaptive_value !== undefined && report.bayes_adaptive_value !== null)
      extra.push(`Bayes-optimal adaptive agent's final episode ${fmt(report.bayes_adaptive_value)}`);
    if (extra.length) node.append(el("p", { class: "values", text: extra.join("; ") }));
  }
  const opponents = [...new Set(evaluations.flatMap(([, r]) => Object.keys(r.opponents)))];
  const grid = el("div", { class: "figures" });
  for (const opponent of opponents) {
    const series = [], oracles = [], hlines = [];
    evaluations.forEach(([name, report], i) => {
      const r = report.opponents[opponent];
      if (!r) return;
      const x = r.mean_return_by_episode.map((_, k) => k + 1);
      series.push({ name, x, y: r.mean_return_by_episode, color: COLORS[i % COLORS.length],
        lo: r.mean_return_by_episode.map((m, k) => m - ci(r, k)), hi: r.mean_return_by_episode.map((m, k) => m + ci(r, k)) });
      if (hlines.length || oracles.length) return;   // the oracle values of the first evaluation that has them
      for (const [key, label] of ORACLES) if (r[key] !== null && r[key] !== undefined) hlines.push({ name: label, y: r[key] });
      if (r.best_response_by_episode)
        oracles.push({ name: "best response on these deals", x, y: r.best_response_by_episode, dashed: true, color: "#555" });
      const bayes = (report.bayes_by_episode || {})[opponent];
      if (bayes) oracles.push({ name: "Bayes-optimal agent", x, y: bayes, dashed: true, color: "#8c564b" });
    });
    series.push(...oracles);
    const figure = lineChart({ title: `against ${opponent}`, series, hlines, xlabel: "episode index", ylabel: "return" });
    figure.setAttribute("data-opponent", opponent);
    grid.append(figure);
  }
  node.append(grid);
}

// ------------------------------------------------------------------ replay
const GRID_LINE = /^[#@+$*. _]{3,}$/;

// A prompt as the agent saw it: a board drawn as cells (Sokoban), moves and memory marked.
function renderPrompt(text) {
  const box = el("div", { class: "prompt" });
  let grid = null;
  for (const line of (text || "").split("\n")) {
    if (GRID_LINE.test(line) && line.includes("#")) {
      if (!grid) { grid = el("div", { class: "grid-board" }); box.append(grid); }
      const row = el("div", { class: "grid-row" });
      for (const ch of line) row.append(el("span", { class: "cell c" + "#@+$*. _".indexOf(ch), text: ch === " " ? "\u00A0" : ch }));
      grid.append(row);
      continue;
    }
    grid = null;
    let kind = "line";
    if (/^\[Episode \d+ of \d+\]/.test(line)) kind = "line episode";
    else if (/^Reflection:|^Memory of earlier episodes|^\[Episode \d+\] /.test(line)) kind = "line memory";
    else if (/^- Opponent|^Opponent |^Moves:.*Opponent|opponent (bets|calls|checks|folds|raises|plays|marks)/i.test(line)) kind = "line opp";
    else if (/^(- )?You /.test(line)) kind = "line you";
    else if (/^Your card|^Your cards|^Board|^Public card|^Hand over/.test(line)) kind = "line cards";
    box.append(el("div", { class: kind, text: line || "\u00A0" }));
  }
  return box;
}

// Frames of a record: each step, then how the last episode ended.
function framesOf(record) {
  const frames = record.steps.map((step, k) => ({ ...step, number: k + 1 }));
  frames.push({ phase: "end", episode: record.returns.length - 1, prompt: record.final_observation || "",
    answer: null, reward: null, number: frames.length + 1 });
  return frames;
}

class Player {
  constructor(root, prefix) {
    this.root = root;
    this.prefix = prefix;
    this.record = null;
    this.position = 0;
    this.frames = [];
  }

  load(record) {
    this.record = record;
    this.frames = record ? framesOf(record) : [];
    this.position = 0;
    this.draw();
  }

  go(position) {
    if (!this.frames.length) return;
    this.position = Math.max(0, Math.min(this.frames.length - 1, position));
    this.draw();
  }

  draw() {
    const root = this.root;
    root.replaceChildren();
    if (!this.record) {
      root.append(el("p", { class: "empty", text: "No meta-episode matches." }));
      return;
    }
    const r = this.record, frame = this.frames[this.position];
    const id = (name) => `${this.prefix}-${name}`;
    const rewardsSoFar = this.frames.slice(0, this.position + 1).filter((f) => f.reward !== null)
      .reduce((sum, f) => sum + f.reward, 0);
    root.append(el("div", { class: "frame-head" },
      el("span", { id: id("counter"), class: "counter", text: `step ${this.position + 1} / ${this.frames.length}` }),
      el("span", { class: "badge phase-" + frame.phase, id: id("phase"), text: frame.phase === "end" ? "meta-episode over" : frame.phase }),
      el("span", { class: "badge", id: id("episode"), text: `episode ${(frame.episode ?? 0) + 1} of ${r.returns.length}` }),
      el("span", { class: "badge", text: `${r.opponent} \u00B7 #${r.index} \u00B7 seat ${r.seat ?? "-"} \u00B7 instance ${r.instance ?? "-"}` })));
    const body = el("div", { class: "frame" });
    body.append(el("div", { class: "seen" }, el("h4", { text: frame.phase === "end" ? "last observation" : "what the agent saw" }),
      renderPrompt(frame.prompt)));
    const side = el("div", { class: "acted" });
    if (frame.answer !== null) {
      side.append(el("h4", { text: frame.phase === "reflect" ? "its reflection (the memory of the next episodes)" : "its answer" }));
      side.append(el("pre", { id: id("answer"), class: "answer phase-" + frame.phase, text: frame.answer }));
      side.append(el("p", { id: id("reward"), text: `reward ${fmt(frame.reward)}` + (frame.invalid_action ?
        ` \u00B7 invalid (${frame.invalid_action.applied || "penalised"})` : "") }));
    }
    const memory = this.frames.slice(0, this.position).filter((f) => f.phase === "reflect");
    if (memory.length) {
      side.append(el("h4", { text: "reflections so far" }));
      memory.forEach((f) => side.append(el("pre", { class: "memory", text: `after episode ${(f.episode ?? 0) + 1}: ${f.answer}` })));
    }
    side.append(el("h4", { text: "returns" }));
    const returns = el("table", { class: "returns", id: id("returns") });
    r.returns.forEach((value, k) => returns.append(el("tr", { class: k === frame.episode ? "current" : "" },
      el("th", { text: `episode ${k + 1}` }), el("td", { text: fmt(value) }), el("td", { text: r.outcomes[k] ?? "-" }))));
    side.append(returns, el("p", { class: "note", text: `rewards so far ${fmt(rewardsSoFar)}` }));
    body.append(side);
    root.append(body);
  }
}

function controls(prefix, player) {
  const button = (name, label, to) => {
    const b = el("button", { id: `${prefix}-${name}`, type: "button", text: label });
    b.addEventListener("click", () => to());
    return b;
  };
  return el("div", { class: "controls" },
    button("first", "\u00AB first", () => player.go(0)),
    button("prev", "\u25C0 previous", () => player.go(player.position - 1)),
    button("next", "next \u25B6", () => player.go(player.position + 1)),
    button("last", "last \u00BB", () => player.go(player.frames.length - 1)),
    el("span", { class: "note", text: "keys: \u2190 \u2192 step, Home / End" }));
}

function select(id, label, options, onChange) {
  const node = el("select", { id });
  for (const [value, text] of options) node.append(el("option", { value, text }));
  node.addEventListener("change", onChange);
  return el("label", {}, label + " ", node);
}

function unique(values) {
  return [...new Set(values.filter((v) => v !== null && v !== undefined))].sort((a, b) => (a > b ? 1 : a < b ? -1 : 0));
}

function drawReplay() {
  const transcripts = DATA.transcripts || {};
  const agents = Object.keys(transcripts);
  if (!agents.length) return null;
  const node = section("replay", "Replay");
  node.append(el("p", { class: "note", text: "Meta-episodes kept with their steps in the transcripts: every prompt " +
    "as the agent saw it (the cards or board, the opponent's moves, the memory of earlier episodes), its answer, " +
    "the reward, and the reflections written between episodes." }));
  const player = new Player(el("div", { id: "player" }), "frame");
  const list = el("div", { id: "replay-list", class: "list" });
  const value = (id) => document.getElementById(id).value;
  const refresh = () => {
    const records = transcripts[value("replay-agent")] || [];
    const chosen = records.filter((r) => (value("filter-opponent") === "*" || r.opponent === value("filter-opponent")) &&
      (value("filter-seat") === "*" || String(r.seat) === value("filter-seat")) &&
      (value("filter-instance") === "*" || String(r.instance) === value("filter-instance")) &&
      (value("filter-outcome") === "*" || r.outcomes[r.outcomes.length - 1] === value("filter-outcome")));
    list.replaceChildren(el("span", { class: "note", id: "replay-count", text: `${chosen.length} of ${records.length}` }));
    chosen.forEach((r) => {
      const b = el("button", { type: "button", class: "meta-episode", "data-opponent": r.opponent, "data-index": r.index,
        text: `${r.opponent} #${r.index} (${r.returns.map((v) => fmt(v)).join(" ")})` });
      b.addEventListener("click", () => {
        list.querySelectorAll(".selected").forEach((x) => x.classList.remove("selected"));
        b.classList.add("selected");
        player.load(r);
      });
      list.append(b);
    });
    const first = list.querySelector(".meta-episode");
    if (first) first.classList.add("selected");
    player.load(chosen[0] || null);
  };
  const all = agents.flatMap((a) => transcripts[a]);
  const any = [["*", "any"]];
  node.append(el("div", { class: "filters" },
    select("replay-agent", "agent", agents.map((a) => [a, a]), refresh),
    select("filter-opponent", "opponent", any.concat(unique(all.map((r) => r.opponent)).map((o) => [o, o])), refresh),
    select("filter-seat", "seat", any.concat(unique(all.map((r) => r.seat)).map((s) => [String(s), String(s)])), refresh),
    select("filter-instance", "instance", any.concat(unique(all.map((r) => r.instance)).map((i) => [String(i), String(i)])), refresh),
    select("filter-outcome", "final outcome", any.concat(unique(all.flatMap((r) => r.outcomes.slice(-1))).map((o) => [o, o])), refresh)));
  const trained = agents.indexOf("trained");
  if (trained >= 0) document.getElementById("replay-agent").value = "trained";
  node.append(list, controls("step", player), player.root);
  refresh();
  return player;
}

// ------------------------------------------------------------------ side by side
function drawCompare() {
  const transcripts = DATA.transcripts || {};
  const agents = Object.keys(transcripts);
  if (agents.length < 2) return null;
  const node = section("compare", "Side by side");
  node.append(el("p", { class: "note", text: "Two agents on the same meta-episode: the same seed and instance, so " +
    "the same deal against the same opponent (e.g. untrained and trained)." }));
  const left = new Player(el("div", { class: "pane", id: "compare-left-pane" }), "left");
  const right = new Player(el("div", { class: "pane", id: "compare-right-pane" }), "right");
  const value = (id) => document.getElementById(id).value;
  const keyOf = (r) => `${r.opponent}#${r.index}`;
  const pick = () => {
    const a = transcripts[value("compare-left")], b = transcripts[value("compare-right")];
    const common = a.map(keyOf).filter((k) => b.some((r) => keyOf(r) === k));
    const keySelect = document.getElementById("compare-key");
    const previous = keySelect.value;
    keySelect.replaceChildren(...common.map((k) => el("option", { value: k, text: k })));
    if (common.includes(previous)) keySelect.value = previous;
    show();
  };
  const show = () => {
    const key = value("compare-key");
    left.load(transcripts[value("compare-left")].find((r) => keyOf(r) === key) || null);
    right.load(transcripts[value("compare-right")].find((r) => keyOf(r) === key) || null);
  };
  const options = agents.map((a) => [a, a]);
  node.append(el("div", { class: "filters" },
    select("compare-left", "left", options, pick), select("compare-right", "right", options, pick),
    select("compare-key", "meta-episode", [], show)));
  const both = { go: (f) => { left.go(f(left)); right.go(f(right)); } };
  const button = (id, label, f) => {
    const b = el("button", { id, type: "button", text: label });
    b.addEventListener("click", () => both.go(f));
    return b;
  };
  node.append(el("div", { class: "controls" }, button("compare-first", "\u00AB first", () => 0),
    button("compare-prev", "\u25C0 previous", (p) => p.position - 1), button("compare-next", "next \u25B6", (p) => p.position + 1),
    button("compare-last", "last \u00BB", (p) => p.frames.length - 1)));
  node.append(el("div", { class: "panes" }, left.root, right.root));
  document.getElementById("compare-left").value = agents.includes("untrained") ? "untrained" : agents[0];
  document.getElementById("compare-right").value = agents.includes("trained") ? "trained" : agents[1];
  pick();
  return null;
}

// ------------------------------------------------------------------ page
function summary() {
  const config = DATA.config;
  const parts = [];
  const first = Object.values(DATA.evaluations || {})[0];
  if (config) parts.push(`${config.env.env_id}, model ${config.model.name_or_path}, ${config.run.iterations} iterations`);
  else if (first) parts.push(first.env_id);
  parts.push(`${(DATA.metrics || []).length} iterations logged, ${Object.keys(DATA.evaluations || {}).length} evaluations, ` +
    `${Object.values(DATA.transcripts || {}).reduce((n, t) => n + t.length, 0)} replayable meta-episodes`);
  document.getElementById("run-summary").textContent = parts.join(" \u00B7 ");
}

summary();
drawTraining();
drawEvaluation();
const replay = drawReplay();
drawCompare();
if (!document.getElementById("report").children.length)
  document.getElementById("report").append(el("p", { class: "empty", text: "This folder holds no metrics.jsonl, eval*.json or transcript*.jsonl." }));
document.addEventListener("keydown", (event) => {
  if (!replay || event.target instanceof HTMLSelectElement || event.altKey || event.ctrlKey || event.metaKey) return;
  const moves = { ArrowRight: replay.position + 1, ArrowLeft: replay.position - 1, Home: 0, End: replay.frames.length - 1 };
  if (event.key in moves) {
    replay.go(moves[event.key]);
    event.preventDefault();
  }
});
document.body.setAttribute("data-ready", "true");
