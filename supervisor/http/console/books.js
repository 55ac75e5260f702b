// The console's Audiobooks view: a book (EPUB, Markdown or text) sent to /v1/audiobooks, its
// chapters followed as they are made, each playable, and the whole book downloaded once done
// (docs/AUDIOBOOKS.md). Uses console.js's globals ($, state, call, getJson, el, badge, guarded,
// progressCell, download, loaders, POLL_MS).
"use strict";

const book = { id: null };

async function chapterAudio(item, play) {
  const blob = await (await call(item.audio_url)).blob();
  if (!play) return download(blob, `${item.id}.${item.format}`);
  $("book-audio").hidden = false;
  $("book-audio").src = URL.createObjectURL(blob);
  $("book-audio").play().catch(() => {});
}

async function loadBook() {
  if (!book.id) return;
  const job = await getJson(`/v1/audiobooks/${book.id}`);
  $("book-detail").hidden = false;
  $("book-title").textContent = `${job.book.title}${job.book.author ? ` (${job.book.author})` : ""}`;
  $("book-state").className = `state ${job.state}`;
  $("book-state").textContent = job.state;
  $("book-progress").replaceChildren(...progressCell(job.progress).childNodes);
  $("book-download").disabled = job.state !== "completed";
  $("book-download").textContent = `Download the book (${job.book.format})`;
  $("chapters-table").tBodies[0].replaceChildren(...job.items.map((item) => el("tr", {},
    el("td", {}, item.chapter + 1), el("td", {}, item.title), el("td", {}, item.id),
    el("td", {}, badge(item.state)), el("td", {}, item.audio_seconds?.toFixed(1) ?? ""),
    el("td", {}, item.error?.message ?? ""),
    el("td", {}, item.audio_url ? el("span", {},
      el("button", { type: "button", onclick: guarded(() => chapterAudio(item, true)) }, "Play"),
      el("button", { type: "button", onclick: guarded(() => chapterAudio(item, false)) }, "Download"),
    ) : null))));
}

$("book-form").addEventListener("submit", guarded(async () => {
  const form = new FormData();
  form.append("file", $("book-file").files[0]);
  form.append("voice", $("book-voice").value.trim() || "alloy");
  form.append("response_format", $("book-format").value);
  const language = $("book-language").value.trim();
  if (language) form.append("language", language);
  const job = await (await call("/v1/audiobooks", { method: "POST", body: form })).json();
  book.id = job.id;
  await loadBook();
}));

$("book-download").addEventListener("click", guarded(async () => {
  const response = await call(`/v1/audiobooks/${book.id}/content`);
  const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
  download(await response.blob(), name ? name[1] : `${book.id}.m4b`);
}));

loaders.books = loadBook;
setInterval(() => {
  if (state.view === "books" && book.id) guarded(loadBook)();
}, POLL_MS);
