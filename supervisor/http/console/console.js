// The OmniVoice console. Plain JavaScript, no build step, nothing loaded from elsewhere: every
// call goes to this server, through the same API and key checks as any client (docs/API.md).
"use strict";

const KEY_STORE = "omnivoice-api-key"; // sessionStorage: the key lives as long as the tab
const POLL_MS = 2000;
const CHART_S = 300; // the charts show the last five minutes, one gridline a minute
const CHART_POINTS = 150; // at most: five minutes of 2 s samples
const OPENAI_VOICES = ["alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova",
  "onyx", "sage", "shimmer", "verse"];
// The design items the speech route accepts, one per category (docs/API.md, "Voice design items").
const DESIGN = {
  gender: ["male", "female"],
  age: ["child", "teenager", "young adult", "middle-aged", "elderly"],
  pitch: ["very low pitch", "low pitch", "moderate pitch", "high pitch", "very high pitch"],
  style: ["whisper"],
  accent: ["american", "australian", "british", "canadian", "chinese", "indian", "japanese",
    "korean", "portuguese", "russian"].map((a) => `${a} accent`),
};
const PREVIEW_TEXT = "This is how I sound. The ferry leaves at noon.";

const $ = (id) => document.getElementById(id);
const state = { view: "try", job: null, lastTry: null, samples: [], previous: null,
  metricsRefused: null };

// ---------------------------------------------------------------- calls to the server

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
  }
}

function authHeaders() {
  const key = sessionStorage.getItem(KEY_STORE);
  return key ? { Authorization: `Bearer ${key}` } : {};
}

// fetch with the key; an error answer (OpenAI shape) becomes an ApiError, a 401 asks for a key.
async function call(path, options = {}) {
  const headers = { ...authHeaders(), ...options.headers };
  const response = await fetch(path, { ...options, headers });
  if (response.ok) return response;
  const body = await response.json().catch(() => null);
  if (response.status === 401) {
    askForKey(sessionStorage.getItem(KEY_STORE)
      ? "This key is not accepted by this server. Check it (no spaces, the whole key), or ask "
        + "the server's operator for one."
      : "This server needs a key.");
  }
  throw new ApiError(response.status, body);
}

const getJson = async (path) => (await call(path)).json();
const postJson = (path, body) => call(path, {
  method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
});

function showError(error) {
  $("error").textContent = error ? String(error.message || error) : "";
}

// Run an action from a button or form: its errors are shown on the page, never thrown away.
function guarded(action) {
  return async (event) => {
    event?.preventDefault();
    try {
      showError(null);
      await action(event);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 401)) showError(error);
    }
  };
}

// ---------------------------------------------------------------- key

function askForKey(message) {
  sessionStorage.removeItem(KEY_STORE);
  $("auth").hidden = false;
  $("views").hidden = true;
  $("auth-error").textContent = message || "";
}

$("auth-form").addEventListener("submit", guarded(async () => {
  sessionStorage.setItem(KEY_STORE, $("auth-key").value.trim());
  state.metricsRefused = null; // another key may see them
  await getJson("/v1/models"); // refused: call() shows the form again with the reason
  $("auth").hidden = true;
  $("views").hidden = false;
  $("auth-error").textContent = "";
  await start();
}));

// ---------------------------------------------------------------- helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

const badge = (text) => el("span", { class: `state ${text}` }, text);
const when = (unix) => (unix ? new Date(unix * 1000).toLocaleString() : "");

function bytes(n) {
  if (n === null || n === undefined) return "";
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(2)} GiB` : `${(n / 2 ** 20).toFixed(0)} MiB`;
}

function download(blob, name) {
  const link = el("a", { href: URL.createObjectURL(blob), download: name });
  link.click();
}

// Play an answer in an audio element. MP3 is streamed through Media Source Extensions, so long
// text starts playing with its first chunk; other formats play once whole. Resolves to the blob.
async function playAnswer(response, audio, format) {
  audio.hidden = false;
  const streamable = format === "mp3" && window.MediaSource
    && MediaSource.isTypeSupported("audio/mpeg");
  if (!streamable) {
    const blob = await response.blob();
    audio.src = URL.createObjectURL(blob);
    audio.play().catch(() => {}); // a browser may refuse autoplay; the controls are there
    return blob;
  }
  const source = new MediaSource();
  audio.src = URL.createObjectURL(source);
  await new Promise((resolve) => source.addEventListener("sourceopen", resolve, { once: true }));
  const buffer = source.addSourceBuffer("audio/mpeg");
  const parts = [];
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    buffer.appendBuffer(value);
    await new Promise((resolve) => buffer.addEventListener("updateend", resolve, { once: true }));
    if (parts.length === 1) audio.play().catch(() => {});
  }
  source.endOfStream();
  return new Blob(parts, { type: "audio/mpeg" });
}

// A microphone recording, decoded and written as 16-bit WAV (the server takes WAV, not WebM).
async function record(button, input) {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const recorder = new MediaRecorder(stream);
  const chunks = [];
  recorder.ondataavailable = (e) => chunks.push(e.data);
  const stopped = new Promise((resolve) => (recorder.onstop = resolve));
  recorder.start();
  button.textContent = "Stop";
  await new Promise((resolve) => button.addEventListener("click", resolve, { once: true }));
  recorder.stop();
  await stopped;
  stream.getTracks().forEach((t) => t.stop());
  button.textContent = "Record";
  const decoded = await new AudioContext().decodeAudioData(await new Blob(chunks).arrayBuffer());
  const files = new DataTransfer();
  files.items.add(new File([wav(decoded.getChannelData(0), decoded.sampleRate)], "recording.wav",
    { type: "audio/wav" }));
  input.files = files.files;
}

function wav(samples, rate) {
  const view = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const text = (at, s) => [...s].forEach((c, i) => view.setUint8(at + i, c.charCodeAt(0)));
  text(0, "RIFF"); view.setUint32(4, 36 + samples.length * 2, true); text(8, "WAVEfmt ");
  view.setUint32(16, 16, true); view.setUint16(20, 1, true); view.setUint16(22, 1, true);
  view.setUint32(24, rate, true); view.setUint32(28, rate * 2, true); view.setUint16(32, 2, true);
  view.setUint16(34, 16, true); text(36, "data"); view.setUint32(40, samples.length * 2, true);
  samples.forEach((s, i) => view.setInt16(44 + i * 2, Math.max(-1, Math.min(1, s)) * 32767, true));
  return view.buffer;
}

document.querySelectorAll("button.record").forEach((button) => {
  button.addEventListener("click", guarded(async (event) => {
    if (button.textContent === "Record") await record(event.target, $(button.dataset.target));
  }));
});

// ---------------------------------------------------------------- Try it

for (const [category, items] of Object.entries(DESIGN)) {
  const select = el("select", { "data-design": category }, el("option", { value: "" }, "—"),
    ...items.map((item) => el("option", {}, item)));
  $("design-pickers").append(el("label", {}, category, select));
}

const designInstructions = () => [...document.querySelectorAll("[data-design]")]
  .map((s) => s.value).filter(Boolean).join(", ");

// Try it's voice and Live's are one list: auto, OpenAI's names, the key's saved voices.
async function loadVoiceChoices() {
  const voices = (await getJson("/v1/audio/voices")).data.filter((v) => !v.builtin);
  for (const select of [$("try-voice"), $("live-voice")]) {
    const chosen = select.value;
    select.replaceChildren(el("option", {}, "auto"),
      el("optgroup", { label: "OpenAI names" }, ...OPENAI_VOICES.map((v) => el("option", {}, v))),
      el("optgroup", { label: "Saved voices" }, ...voices.map((v) => el("option", {}, v.id))));
    if (chosen) select.value = chosen;
  }
}

$("try-form").addEventListener("submit", guarded(async () => {
  const format = $("try-format").value;
  const fields = { input: $("try-input").value, response_format: format };
  if ($("try-language").value) fields.language = $("try-language").value;
  if ($("try-steps").value) fields.num_step = Number($("try-steps").value);
  const seed = $("try-seed").value.trim(); // seeds go up to 2^63: kept as digits, never a Number
  const instructions = designInstructions();
  if (instructions) fields.instructions = instructions;
  const reference = $("try-ref").files[0];
  $("try-speak").disabled = true;
  $("try-state").textContent = "generating…";
  try {
    let response;
    if (reference) {
      const form = new FormData();
      Object.entries(fields).forEach(([k, v]) => form.append(k, v));
      if (seed) form.append("seed", seed);
      form.append("file", reference);
      form.append("transcript", $("try-transcript").value);
      response = await call("/v1/audio/clone", { method: "POST", body: form });
    } else {
      const body = { ...fields, voice: $("try-voice").value };
      if (seed) body.seed = JSON.rawJSON(seed);
      response = await postJson("/v1/audio/speech", body);
    }
    const used = response.headers.get("X-Seed");
    $("try-result").hidden = false;
    $("try-seed-used").textContent = used;
    state.lastTry = { instructions, reference, transcript: $("try-transcript").value };
    $("try-save").disabled = !instructions && !reference;
    const blob = await playAnswer(response, $("try-audio"), format);
    $("try-download").href = URL.createObjectURL(blob);
    $("try-download").download = `omnivoice-${used}.${format}`;
    $("try-state").textContent = `done (${response.headers.get("X-Chunks")} chunk(s))`;
  } finally {
    $("try-speak").disabled = false;
    if ($("try-state").textContent === "generating…") $("try-state").textContent = "";
  }
}));

// Keep the voice one liked: the next request uses the seed that made it.
$("try-reuse-seed").addEventListener("click", () => {
  $("try-seed").value = $("try-seed-used").textContent;
});

// Save what was just tried: a clone from its clip and transcript, a design from its items.
$("try-save").addEventListener("click", guarded(async () => {
  const tried = state.lastTry;
  const form = new FormData();
  form.append("name", $("try-save-name").value.trim());
  if (tried.reference) {
    form.append("audio_sample", tried.reference);
    form.append("transcript", tried.transcript);
  } else {
    form.append("type", "prompt");
    form.append("prompt", tried.instructions);
  }
  await call("/v1/audio/voices", { method: "POST", body: form });
  $("try-state").textContent = `saved as ${$("try-save-name").value.trim()}`;
  await loadVoiceChoices();
}));

// ---------------------------------------------------------------- Voices

async function preview(voice) {
  const body = { input: PREVIEW_TEXT, voice, response_format: "mp3" };
  const response = await postJson("/v1/audio/speech", body);
  await playAnswer(response, $("voice-preview"), "mp3");
}

async function deleteVoice(name) {
  await call(`/v1/audio/voices/${encodeURIComponent(name)}`, { method: "DELETE" });
  await Promise.all([loadVoices(), loadVoiceChoices()]);
}

function voiceRow(v) {
  const previewButton = el("button", { type: "button", onclick: guarded(() => preview(v.id)) },
    "Preview");
  const deleteButton = v.builtin || !v.deletable ? null : el("button",
    { type: "button", class: "delete", onclick: guarded(() => deleteVoice(v.id)) }, "Delete");
  return el("tr", { "data-voice": v.id }, el("td", {}, v.id),
    el("td", {}, v.builtin ? "built-in" : v.type), el("td", {}, v.prompt || v.transcript || ""),
    el("td", {}, previewButton, deleteButton));
}

async function loadVoices() {
  const voices = (await getJson("/v1/audio/voices")).data;
  $("voices-table").tBodies[0].replaceChildren(...voices.map(voiceRow));
}

$("voice-form").addEventListener("submit", guarded(async () => {
  const form = new FormData();
  form.append("name", $("voice-name").value.trim());
  form.append("audio_sample", $("voice-file").files[0]);
  form.append("transcript", $("voice-transcript").value);
  await call("/v1/audio/voices", { method: "POST", body: form });
  $("voice-form").reset();
  await Promise.all([loadVoices(), loadVoiceChoices()]);
}));

// ---------------------------------------------------------------- Jobs

function progressCell(progress) {
  const done = progress.done + progress.failed + progress.cancelled;
  return el("td", {}, el("progress", { max: progress.total, value: done }),
    ` ${progress.done}/${progress.total}` + (progress.failed ? `, ${progress.failed} failed` : ""));
}

async function loadJobs() {
  const jobs = (await getJson("/v1/jobs?limit=20")).data;
  $("jobs-table").tBodies[0].replaceChildren(...jobs.map((job) => el("tr", {
    class: `selectable${job.id === state.job ? " selected" : ""}`, "data-job": job.id,
    onclick: guarded(() => { state.job = job.id; return Promise.all([loadJobs(), loadJob()]); }),
  }, el("td", {}, el("code", {}, job.id)), el("td", {}, badge(job.state)),
  progressCell(job.progress), el("td", {}, when(job.created_at)))));
}

function qaCell(qa) {
  if (!qa) return el("td", {});
  const checks = JSON.stringify(qa.checks || {});
  return el("td", { title: checks }, badge(qa.passed ? "passed" : "failed"));
}

async function itemAudio(item, play) {
  const blob = await (await call(item.audio_url)).blob();
  if (!play) return download(blob, `${item.id ?? item.index}.${item.format}`);
  $("item-audio").hidden = false;
  $("item-audio").src = URL.createObjectURL(blob);
  $("item-audio").play().catch(() => {});
}

async function loadJob() {
  if (!state.job) return;
  const job = await getJson(`/v1/jobs/${state.job}`);
  $("job-detail").hidden = false;
  $("job-id").textContent = job.id;
  $("job-state").className = `state ${job.state}`;
  $("job-state").textContent = job.state;
  $("job-cancel").disabled = !["queued", "running"].includes(job.state);
  $("items-table").tBodies[0].replaceChildren(...job.items.map((item) => el("tr", {},
    el("td", {}, item.index), el("td", {}, item.id ?? ""), el("td", {}, badge(item.state)),
    el("td", {}, item.attempts), el("td", {}, item.audio_seconds?.toFixed(2) ?? ""),
    qaCell(item.qa),
    el("td", {}, item.error?.message ?? ""),
    el("td", {}, item.audio_url ? el("span", {},
      el("button", { type: "button", onclick: guarded(() => itemAudio(item, true)) }, "Play"),
      el("button", { type: "button", onclick: guarded(() => itemAudio(item, false)) }, "Download"),
    ) : null))));
}

$("job-cancel").addEventListener("click", guarded(async () => {
  await call(`/v1/jobs/${state.job}`, { method: "DELETE" });
  await Promise.all([loadJobs(), loadJob()]);
}));

// A manifest is JSON lines of job items, as `omnivoice-supervisor synth` reads it. Every problem
// found here is listed at once, by line; the server then checks each item as a speech request.
function readManifest(text) {
  const items = [], lines = [], problems = [], ids = {};
  text.split("\n").forEach((line, n) => {
    if (!line.trim()) return;
    const at = `line ${n + 1}`;
    let item;
    try {
      item = JSON.parse(line);
    } catch {
      problems.push(`${at}: not JSON; each item is one whole JSON object on one line`);
      return;
    }
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      problems.push(`${at}: not a JSON object (a speech request with an optional "id")`);
      return;
    }
    if (typeof item.input !== "string" || !item.input.trim()) problems.push(`${at}: no "input" text`);
    if (item.id !== undefined && ids[item.id]) {
      problems.push(`${at}: "id" ${JSON.stringify(item.id)} is also the id of line ${ids[item.id]}`);
    } else if (item.id !== undefined) ids[item.id] = n + 1;
    items.push(item);
    lines.push(n + 1);
  });
  if (!items.length && !problems.length) problems.push("the manifest has no items");
  return { items, lines, problems };
}

function showProblems(problems) {
  $("job-problems").hidden = !problems.length;
  $("job-problems").querySelector("ul").replaceChildren(...problems.map((p) => el("li", {}, p)));
}

// The server's 400 names an item as items[n]: said by its manifest line instead.
const byLine = (message, lines) => message.replace(/^items\[(\d+)\]/,
  (whole, n) => (lines[Number(n)] ? `line ${lines[Number(n)]}` : whole));

$("job-form").addEventListener("submit", guarded(async () => {
  showProblems([]);
  const { items, lines, problems } = readManifest(await $("job-file").files[0].text());
  if (problems.length) return showProblems(problems);
  let job;
  try {
    job = await (await postJson("/v1/jobs", { items })).json();
  } catch (error) {
    if (!(error instanceof ApiError) || error.status === 401) throw error;
    return showProblems([byLine(error.message, lines)]);
  }
  state.job = job.id;
  $("job-form").reset();
  await Promise.all([loadJobs(), loadJob()]);
}));

// ---------------------------------------------------------------- Supervision

// The Prometheus text of /metrics as {"name{labels}": value}, skipping comments.
function parseMetrics(text) {
  const values = {};
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?)\s+(\S+)/.exec(line);
    if (match) values[match[1]] = Number(match[2]);
  }
  return values;
}

// The sum of a metric over all its label sets.
const sumOf = (metrics, name) => Object.entries(metrics)
  .filter(([key]) => key === name || key.startsWith(`${name}{`))
  .reduce((total, [, value]) => total + value, 0);

// The time axis under each chart: a label a minute, where the canvas draws its gridlines.
document.querySelectorAll(".charts .axis").forEach((axis) => {
  for (let minutes = CHART_S / 60; minutes >= 0; minutes -= 1) {
    const left = `${(100 * (1 - (minutes * 60) / CHART_S)).toFixed(2)}%`;
    const label = el("span", {}, minutes ? `−${minutes} min` : "now");
    label.style.left = left; // the CSSOM, not a style attribute: the page's CSP forbids those
    axis.append(label);
  }
});

// Samples placed by when they were taken (a poll can run late): the right edge is now.
function chart(canvas, samples, value, format) {
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const now = performance.now() / 1000;
  const xOf = (t) => width * (1 - (now - t) / CHART_S);
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = "#eaecf0";
  ctx.lineWidth = 1;
  for (let s = 0; s <= CHART_S; s += 60) {
    const x = Math.round(xOf(now - s)) + 0.5;
    ctx.beginPath(); ctx.moveTo(x, 18); ctx.lineTo(x, height); ctx.stroke();
  }
  const points = samples.map(value);
  const top = Math.max(1e-9, ...points);
  ctx.fillStyle = "#667085";
  ctx.font = "11px system-ui";
  ctx.fillText(`max ${format(top)}   now ${format(points.at(-1) ?? 0)}`, 6, 13);
  ctx.strokeStyle = "#2457c5";
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  samples.forEach((s, i) => {
    const y = height - 4 - (points[i] / top) * (height - 24);
    if (i === 0) ctx.moveTo(xOf(s.t), y); else ctx.lineTo(xOf(s.t), y);
  });
  ctx.stroke();
}

// One sample of the server's own counters; rates come from the difference with the last one.
function sample(metrics) {
  const now = { t: performance.now() / 1000,
    audio: sumOf(metrics, "omnivoice_audio_produced_seconds_total"),
    firstSum: sumOf(metrics, "omnivoice_time_to_first_audio_seconds_sum"),
    firstCount: sumOf(metrics, "omnivoice_time_to_first_audio_seconds_count") };
  const before = state.previous;
  state.previous = now;
  if (!before) return;
  const seconds = now.t - before.t;
  const answered = now.firstCount - before.firstCount;
  state.samples.push({ t: now.t, throughput: (now.audio - before.audio) / seconds,
    latency: answered > 0 ? (now.firstSum - before.firstSum) / answered : 0 });
  while (state.samples.length > CHART_POINTS || now.t - state.samples[0].t > CHART_S) {
    state.samples.shift();
  }
}

// /metrics is the whole server's: a tenant's key gets 403, and the view shows the sidecars and
// the queue without the charts (asked once a key; the refusal is no error of the other views).
async function loadMetrics() {
  if (state.metricsRefused) return null;
  try {
    return parseMetrics(await (await call("/metrics")).text());
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 403)) throw error;
    state.metricsRefused = error.message;
    return null;
  }
}

async function loadSupervision() {
  const [health, metrics] = await Promise.all([getJson("/health"), loadMetrics()]);
  // The speech sidecars, then the ASR sidecar of --asr-model (/health's `asr`), if any.
  const sidecars = [...health.sidecars, ...(health.asr ?? [])];
  $("sidecars-table").tBodies[0].replaceChildren(...sidecars.map((s) => {
    const gpu = metrics?.[`omnivoice_gpu_memory_peak_bytes{device="${s.device}"}`];
    const memory = [s.memory_bytes ? `${bytes(s.memory_bytes)} RAM` : "",
      gpu ? `${bytes(gpu)} GPU peak` : ""];
    const kills = Object.entries(s.kills).map(([reason, n]) => `${reason} ×${n}`).join(", ");
    return el("tr", { "data-sidecar": s.id }, el("td", {}, s.id), el("td", {}, s.device),
      el("td", { class: "pid" }, s.pid ?? "—"), el("td", {}, badge(s.state)),
      el("td", {}, memory.filter(Boolean).join(", ")), el("td", { class: "restarts" }, s.restarts),
      el("td", { class: "last-kill", title: kills }, s.last_kill ?? "—"),
      el("td", {}, s.last_error ?? ""));
  }));
  const queue = health.queue;
  const box = (label, value) => el("div", { class: "queue-box" }, el("b", {}, value), label);
  $("queue").replaceChildren(
    box("s of audio waiting, interactive", queue.waiting_audio_s.interactive.toFixed(1)),
    box("s of audio waiting, bulk (jobs)", queue.waiting_audio_s.bulk.toFixed(1)),
    box("s admitted, of the limit", `${queue.audio_s.toFixed(1)} / ${queue.limit_audio_s}`),
    box("tasks unfinished", queue.tasks));
  document.querySelector("#view-supervision .charts").hidden = !metrics;
  $("charts-refused").hidden = Boolean(metrics);
  $("charts-refused").textContent = `No charts with this key: ${state.metricsRefused}.`;
  if (!metrics) return;
  sample(metrics);
  chart($("chart-throughput"), state.samples, (s) => s.throughput, (v) => `${v.toFixed(2)}×`);
  chart($("chart-latency"), state.samples, (s) => s.latency, (v) => `${v.toFixed(2)} s`);
}

// ---------------------------------------------------------------- views and polling

const loaders = {
  try: loadVoiceChoices,
  voices: loadVoices,
  jobs: () => Promise.all([loadJobs(), loadJob()]),
  supervision: loadSupervision,
};

function show(view) {
  state.view = view;
  document.querySelectorAll("nav button")
    .forEach((b) => b.classList.toggle("active", b.dataset.view === view));
  document.querySelectorAll(".view").forEach((v) => (v.hidden = v.id !== `view-${view}`));
  return guarded(loaders[view])();
}

document.querySelectorAll("nav button")
  .forEach((b) => b.addEventListener("click", () => show(b.dataset.view)));

// The badge is /health (always open). Supervision samples all the time, so its charts have a
// history when it is opened; jobs refresh while they are shown.
async function poll() {
  try {
    const health = await (await fetch("/health")).json();
    $("status-badge").className = `badge ${health.status}`;
    $("status-badge").textContent = health.status;
    if (!$("views").hidden) await loadSupervision();
    if (!$("views").hidden && state.view === "jobs") await loaders.jobs();
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) showError(error);
  }
  setTimeout(poll, POLL_MS);
}

async function start() {
  await show(state.view);
}

// /health shows its settings only to a caller the server lets in (any caller of an open
// server), so without them the server has keys and the page asks for one first.
(async () => {
  const health = await (await fetch("/health")).json();
  if (health.settings) $("try-steps").placeholder = health.settings.num_step;
  if (!health.settings && !sessionStorage.getItem(KEY_STORE)) askForKey("");
  else await start();
  poll();
})();
