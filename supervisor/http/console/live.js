// The console's Live view: what is typed goes to /v1/audio/speech/stream as it is typed, and
// each sentence's audio is played as soon as it comes (docs/API.md, "Speech over a WebSocket"):
// as the session's audio.start says, raw PCM at its sample rate as each frame arrives, any
// other format decoded once the sentence's file is whole. Uses console.js's globals ($,
// KEY_STORE, loaders, loadVoiceChoices).
"use strict";

const LIVE_RATE = 24000;
const live = {
  socket: null, sent: "", audio: null, playAt: 0, odd: null,
  format: "pcm", rate: LIVE_RATE, held: [], // the sentence being received
};

function liveSocket() {
  if (live.socket && live.socket.readyState <= WebSocket.OPEN) return live.socket;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/v1/audio/speech/stream`);
  socket.binaryType = "arraybuffer";
  const config = { type: "session.config", response_format: "pcm",
    voice: $("live-voice").value || "auto" };
  const language = $("live-language").value.trim();
  if (language) config.language = language;
  // A browser cannot send the Authorization header: the key goes in the first message.
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) config.api_key = key;
  socket.addEventListener("open", () => socket.send(JSON.stringify(config)));
  socket.addEventListener("message", (event) => liveMessage(event.data));
  socket.addEventListener("close", () => {
    $("live-state").textContent = "closed; typing opens a new session";
    live.socket = null;
    live.sent = "";
  });
  live.socket = socket;
  live.sent = "";
  return socket;
}

function liveSend(message) {
  const socket = liveSocket();
  const text = JSON.stringify(message);
  if (socket.readyState === WebSocket.OPEN) socket.send(text);
  else socket.addEventListener("open", () => socket.send(text), { once: true });
}

// An error the same as the one just listed is counted on it, not listed again: a session whose
// config was refused answers every keystroke's text with the same error.
function liveLog(text, failed) {
  const last = $("live-log").lastElementChild;
  if (failed && last && last.dataset.text === text) {
    last.dataset.count = String(Number(last.dataset.count) + 1);
    last.textContent = `${text} (${last.dataset.count} times)`;
    return;
  }
  const item = document.createElement("li");
  item.textContent = text;
  Object.assign(item.dataset, { text, count: "1" });
  if (failed) item.className = "error";
  $("live-log").append(item);
}

function liveMessage(data) {
  if (data instanceof ArrayBuffer) {
    if (live.format === "pcm") livePlay(data);
    else live.held.push(data);
    return;
  }
  const event = JSON.parse(data);
  if (event.type === "audio.start") {
    $("live-state").textContent = `speaking: ${event.sentence_text}`;
    Object.assign(live, { format: event.format, rate: event.sample_rate || LIVE_RATE });
    Object.assign(live, { odd: null, held: [] });
  } else if (event.type === "audio.done") {
    if (live.held.length) liveDecode(new Blob(live.held));
    live.held = [];
    const size = live.format === "pcm" ? `${(event.total_bytes / 2 / live.rate).toFixed(2)} s`
      : `${(event.total_bytes / 1024).toFixed(1)} KiB of ${live.format}`;
    liveLog(event.error ? `sentence ${event.sentence_index + 1}: ${event.error}`
      : `sentence ${event.sentence_index + 1}: ${size}`, Boolean(event.error));
  } else if (event.type === "session.done") $("live-state").textContent = "done";
  else if (event.type === "error") liveLog(event.message, true);
}

function liveContext() {
  live.audio = live.audio || new AudioContext({ sampleRate: LIVE_RATE });
  return live.audio;
}

// Each clip is scheduled right after the one before, so the sentences play without gaps.
function liveSchedule(clip) {
  const source = live.audio.createBufferSource();
  source.buffer = clip;
  source.connect(live.audio.destination);
  live.playAt = Math.max(live.playAt, live.audio.currentTime);
  source.start(live.playAt);
  live.playAt += clip.duration;
}

// 16-bit little-endian PCM at the sentence's rate, a frame at a time (a sample may be split).
function livePlay(buffer) {
  let bytes = new Uint8Array(buffer);
  if (live.odd !== null) bytes = Uint8Array.of(live.odd, ...bytes);
  live.odd = bytes.length % 2 ? bytes[bytes.length - 1] : null;
  const count = Math.floor(bytes.length / 2);
  if (!count) return;
  const view = new DataView(bytes.buffer, bytes.byteOffset, count * 2);
  const clip = liveContext().createBuffer(1, count, live.rate);
  const samples = clip.getChannelData(0);
  for (let i = 0; i < count; i += 1) samples[i] = view.getInt16(2 * i, true) / 32768;
  liveSchedule(clip);
}

// A whole file (wav, mp3, flac, opus, aac): the browser decodes it. Sentences decode in order.
let liveDecoding = Promise.resolve();
function liveDecode(file) {
  liveDecoding = liveDecoding
    .then(async () => liveSchedule(await liveContext().decodeAudioData(await file.arrayBuffer())))
    .catch((error) => liveLog(`this sentence's ${live.format} could not be played: ${error}`, true));
}

// What was added at the end is sent; an edit of what was sent cannot unsay it, and is kept as
// it is for what follows.
$("live-input").addEventListener("input", () => {
  const text = $("live-input").value;
  const added = text.startsWith(live.sent) ? text.slice(live.sent.length) : "";
  if (added) liveSend({ type: "input.text", text: added });
  live.sent = text;
});

$("live-done").addEventListener("click", () => {
  liveSend({ type: "input.done" });
  $("live-input").value = "";
  live.sent = "";
});

// Another voice or language is another session: the next text opens it.
for (const id of ["live-voice", "live-language"]) {
  $(id).addEventListener("change", () => {
    if (live.socket) live.socket.close();
  });
}

loaders.live = loadVoiceChoices;
