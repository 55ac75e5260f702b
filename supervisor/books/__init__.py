"""Books read for `POST /v1/audiobooks` and `synth --book`: EPUB 2 and 3, Markdown and plain
text, each as a title, an author, a language, a cover and its chapters' text in reading order.

    model     Book, Chapter, and the 400 every unreadable book gets (BookError)
    archive   the zip's directory checked before anything is inflated; XML without entities
    xhtml     a chapter's text from its XHTML (headings, paragraphs, lists; notes, images dropped)
    epub      the spine, the navigation document or NCX, the metadata and the cover (ebooklib)
    plain     Markdown and plain text, cut at `#` headings or at lines such as "Chapter 3"
    read      which of them a file is
"""
