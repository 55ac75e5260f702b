// The console's Live view: what is typed goes to /v1/audio/speech/stream as it is typed, and
// each sentence's audio (16-bit PCM at 24 kHz) is played as soon as it comes (docs/API.md,
// "Speech over a WebSocket"). Uses console.js's globals ($, KEY_STORE, loaders).
"use strict";

const LIVE_RATE = 24000;
const live = { socket: null, sent: "", audio: null, playAt: 0, odd: null };

function liveSocket() {
  if (live.socket && live.socket.readyState <= WebSocket.OPEN) return live.socket;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/v1/audio/speech/stream`);
  socket.binaryType = "arraybuffer";
  const config = { type: "session.config", response_format: "pcm",
    voice: $("live-voice").value.trim() || "alloy" };
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

function liveLog(text, failed) {
  const item = document.createElement("li");
  item.textContent = text;
  if (failed) item.className = "error";
  $("live-log").append(item);
}

function liveMessage(data) {
  if (data instanceof ArrayBuffer) {
    livePlay(data);
    return;
  }
  const event = JSON.parse(data);
  if (event.type === "audio.start") $("live-state").textContent = `speaking: ${event.sentence_text}`;
  else if (event.type === "audio.done") {
    const seconds = (event.total_bytes / 2 / LIVE_RATE).toFixed(2);
    liveLog(event.error ? `sentence ${event.sentence_index + 1}: ${event.error}`
      : `sentence ${event.sentence_index + 1}: ${seconds} s`, Boolean(event.error));
  } else if (event.type === "session.done") $("live-state").textContent = "done";
  else if (event.type === "error") liveLog(event.message, true);
}

// Each frame is scheduled right after the one before, so the sentences play without gaps.
function livePlay(buffer) {
  let bytes = new Uint8Array(buffer);
  if (live.odd !== null) bytes = Uint8Array.of(live.odd, ...bytes);
  live.odd = bytes.length % 2 ? bytes[bytes.length - 1] : null;
  const count = Math.floor(bytes.length / 2);
  if (!count) return;
  live.audio = live.audio || new AudioContext({ sampleRate: LIVE_RATE });
  const view = new DataView(bytes.buffer, bytes.byteOffset, count * 2);
  const clip = live.audio.createBuffer(1, count, LIVE_RATE);
  const samples = clip.getChannelData(0);
  for (let i = 0; i < count; i += 1) samples[i] = view.getInt16(2 * i, true) / 32768;
  const source = live.audio.createBufferSource();
  source.buffer = clip;
  source.connect(live.audio.destination);
  live.playAt = Math.max(live.playAt, live.audio.currentTime);
  source.start(live.playAt);
  live.playAt += clip.duration;
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

loaders.live = () => {};
