"""Reading patient XML safely: entities decoded (never resolved), the document streamed with size and element limits.

Exported clinical text is often HTML-flavoured: ``&nbsp;``, ``&eacute;``, a bare ``&`` in "A & B". XML defines
only ``&amp; &lt; &gt; &quot; &apos;``, and a parser that meets any other name either rejects the file or (with a
DTD) keeps an unexpanded entity node whose following text a reader of ``.text`` silently loses. `EntityDecoder`
is a DTD-free pre-pass over the bytes, before the parser sees them, in text and attribute values alike (CDATA
sections, comments and the DOCTYPE are copied as they are):

- an HTML5 named entity (`html.entities.html5`) becomes numeric character references (``&nbsp;`` → ``&#160;``);
- any other undeclared name, or a bare ``&``, is kept as literal text (``&foo;`` → ``&amp;foo;``);
- a name the document's own DTD declares is left to the parser, which never expands it (``resolve_entities``
  off, no DTD loaded, no network): a reference to it is an `XmlReadError` naming the file and line — so an
  external entity (``SYSTEM "file:///…"``) is never read, and no text after it is lost unannounced.

>>> decoder = EntityDecoder()
>>> decoder.feed(b'<a t="x&nbsp;y">Patient&nbsp;was seen &amp; A & B &foo; &#233;</a>') + decoder.close()
b'<a t="x&#160;y">Patient&#160;was seen &amp; A &amp; B &amp;foo; &#233;</a>'

`stream_xml` streams a file (or bytes) through the decoder into lxml's pull parser (handing out each complete child
of the root, then dropping it), raising `XmlReadError` in one line naming the file when it is larger than
`XmlLimits.max_bytes` or holds more than `XmlLimits.max_elements` elements, and showing a progress bar on stderr
for files of `XmlLimits.progress_bytes` or more. Limits come from ``VISTA_XML_MAX_BYTES`` /
``VISTA_XML_MAX_ELEMENTS`` / ``VISTA_XML_PROGRESS_BYTES`` when set (defaults 2 GiB, 5,000,000 elements, 64 MiB).
"""

from __future__ import annotations

import html.entities
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from vista.shared.errors import UserError

_XML_NAMES = frozenset({"amp", "lt", "gt", "quot", "apos"})
_HTML5 = {name[:-1]: chars for name, chars in html.entities.html5.items() if name.endswith(";")}
_REFERENCE = re.compile(rb"&(?:([A-Za-z_:][A-Za-z0-9._:-]*);|#[0-9]+;|#x[0-9A-Fa-f]+;)?")
_MARKUP = re.compile(rb"<!(?:\[CDATA\[|--|DOCTYPE)")
_ENDS = {b"<![CDATA[": re.compile(rb"\]\]>"), b"<!--": re.compile(rb"-->"), b"<!DOCTYPE": re.compile(rb">"),
         b"<!DOCTYPE[": re.compile(rb"\]\s*>")}
_DECLARED = re.compile(rb"<!ENTITY\s+(?:%\s+)?([^\s\"'>%]+)")
_HOLD = 64  # bytes kept back at a chunk's end: longer than any reference or markup opener
CHUNK_BYTES = 1 << 20


class XmlReadError(ValueError, UserError):
    """An XML file cannot be read: names the file, the line when known, and what is wrong."""

    def __init__(self, path: str, problem: str, *, line: int | None = None):
        self.path, self.problem, self.line = str(path), problem, line
        super().__init__(f"{self.path}: {'line ' + str(line) + ': ' if line else ''}{problem}")

    def __reduce__(self):  # keyword-only argument: teach pickle (Ray ships exceptions between processes)
        return (_rebuild, (self.path, self.problem, self.line))


def _rebuild(path: str, problem: str, line: int | None) -> XmlReadError:
    return XmlReadError(path, problem, line=line)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(float(raw))
    except ValueError:
        raise XmlReadError(f"${name}", f"{raw!r} is not a number") from None
    if value <= 0:
        raise XmlReadError(f"${name}", f"{raw!r} is not a positive number")
    return value


@dataclass(frozen=True, slots=True)
class XmlLimits:
    """How much one XML document may hold, and from what size reading it shows progress."""

    max_bytes: int = 2 << 30
    max_elements: int = 5_000_000
    progress_bytes: int = 64 << 20

    @classmethod
    def from_env(cls) -> XmlLimits:
        """The defaults, overridden by ``VISTA_XML_MAX_BYTES``, ``VISTA_XML_MAX_ELEMENTS``, ``VISTA_XML_PROGRESS_BYTES``."""
        default = cls()
        return cls(_env_int("VISTA_XML_MAX_BYTES", default.max_bytes),
                   _env_int("VISTA_XML_MAX_ELEMENTS", default.max_elements),
                   _env_int("VISTA_XML_PROGRESS_BYTES", default.progress_bytes))


class EntityDecoder:
    """Rewrites entity references a DTD-free XML parser cannot take (see the module docstring); fed in chunks."""

    def __init__(self) -> None:
        self._pending = b""
        self._mode: bytes | None = None  # None: markup/text; else the opener whose end is awaited
        self.declared: set[str] = set()
        self.decoded = 0  # HTML entities turned into characters
        self.literal = 0  # undeclared names and bare ampersands kept as text

    def _reference(self, match: re.Match[bytes]) -> bytes:
        whole, name = match.group(0), match.group(1)
        if whole == b"&":
            self.literal += 1
            return b"&amp;"
        if name is None:
            return whole  # a numeric character reference
        text = name.decode("ascii")
        if text in _XML_NAMES or text in self.declared:
            return whole
        chars = _HTML5.get(text)
        if chars is None:
            self.literal += 1
            return b"&amp;" + name + b";"
        self.decoded += 1
        return "".join(f"&#{ord(c)};" for c in chars).encode("ascii")

    def _text(self, data: bytes) -> bytes:
        return _REFERENCE.sub(self._reference, data) if b"&" in data else data

    def feed(self, data: bytes, *, final: bool = False) -> bytes:
        """The rewritten bytes of ``data`` that are safe to hand on (a possibly cut tail is kept for the next call)."""
        buf = self._pending + data
        out: list[bytes] = []
        pos = 0
        while pos < len(buf):
            if self._mode is None:
                found = _MARKUP.search(buf, pos)
                end = found.start() if found else len(buf)
                if found is None and not final:
                    lo = max(pos, end - _HOLD)
                    cut = max(buf.rfind(b"&", lo, end), buf.rfind(b"<", lo, end))
                    end = cut if cut >= 0 else end
                out.append(self._text(buf[pos:end]))
                pos = end
                if found is None:
                    break
                self._mode = b"<!DOCTYPE" if found.group(0) == b"<!DOCTYPE" else found.group(0)
                out.append(found.group(0))
                pos = found.end()
            else:
                if self._mode == b"<!DOCTYPE":  # an internal subset ends at "]>", a bare DOCTYPE at ">"
                    bracket, close = buf.find(b"[", pos), buf.find(b">", pos)
                    if bracket >= 0 and (close < 0 or bracket < close):
                        self._mode = b"<!DOCTYPE["
                finder = _ENDS[self._mode]
                found = finder.search(buf, pos)
                if found is None:
                    if not final:
                        keep = max(pos, len(buf) - _HOLD)
                        self._declare(buf[pos:keep])
                        out.append(buf[pos:keep])
                        pos = keep
                    else:
                        out.append(buf[pos:])
                        pos = len(buf)
                    break
                if self._mode.startswith(b"<!DOCTYPE"):
                    self._declare(buf[pos:found.end()])
                out.append(buf[pos:found.end()])
                pos = found.end()
                self._mode = None
        self._pending = buf[pos:]
        return b"".join(out)

    def _declare(self, dtd: bytes) -> None:
        self.declared.update(m.group(1).decode("utf-8", "replace") for m in _DECLARED.finditer(dtd))

    def close(self) -> bytes:
        """The rest of the document."""
        return self.feed(b"", final=True)


def _chunks(source: Path | bytes, name: str, limits: XmlLimits) -> Iterator[bytes]:
    """The document's bytes in chunks, with a progress bar on stderr for a large file."""
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source)
        if len(view) > limits.max_bytes:
            raise XmlReadError(name, f"is {len(view):,} bytes, more than the limit of {limits.max_bytes:,} "
                                     "(VISTA_XML_MAX_BYTES)")
        for start in range(0, len(view), CHUNK_BYTES):
            yield bytes(view[start:start + CHUNK_BYTES])
        return
    try:
        size = source.stat().st_size
        handle = source.open("rb")
    except OSError as exc:
        raise XmlReadError(name, f"cannot read the file ({exc.strerror or exc})") from None
    if size > limits.max_bytes:
        handle.close()
        raise XmlReadError(name, f"is {size:,} bytes, more than the limit of {limits.max_bytes:,} (VISTA_XML_MAX_BYTES)")
    bar = None
    if size >= limits.progress_bytes:
        from tqdm import tqdm

        bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {source.name}", file=sys.stderr,
                   mininterval=1.0, leave=False)
    with handle:
        try:
            while chunk := handle.read(CHUNK_BYTES):
                if bar is not None:
                    bar.update(len(chunk))
                yield chunk
        except OSError as exc:
            raise XmlReadError(name, f"cannot read the file ({exc.strerror or exc})") from None
        finally:
            if bar is not None:
                bar.close()


_NO_TAG = "{urn:vista:none}none"  # a tag filter no element matches: the parser reports no event at all


def _unexpanded(node: etree._Element, name: str) -> None:
    """`XmlReadError` for the first entity node under ``node`` (only a DTD-declared entity can leave one)."""
    for entity in node.iter(etree.Entity):
        raise XmlReadError(name, f"entity {entity.text} is declared in the document's DTD and is not expanded "
                                 "(external entities are never read); replace it with its text",
                           line=entity.sourceline or node.sourceline)


def _elements(chunk: bytes) -> int:
    """About how many elements start in ``chunk`` (its start tags; a tag cut at a chunk edge may count once more)."""
    return chunk.count(b"<") - chunk.count(b"</") - chunk.count(b"<!") - chunk.count(b"<?")


def stream_xml(source: Path | bytes, *, name: str | None = None, limits: XmlLimits | None = None,
               stream_tags: tuple[str, ...] = ()) -> Iterator[tuple[etree._Element, etree._Element | None]]:
    """The document at ``source`` (a path, or its bytes named ``name``) with entities decoded, as ``(root, child)``
    pairs, ending with ``(root, None)`` once the document is complete.

    When the root's tag is one of ``stream_tags``, each child of the root comes as soon as it is complete and is
    removed from the tree once the next pair is asked for (memory stays flat); otherwise the whole tree is kept and
    only the final pair comes. `XmlReadError` names the file (and line when known) for a document that is not
    well-formed, an unexpanded entity, or a limit passed.
    """
    name = str(name if name is not None else source if isinstance(source, Path) else "<xml>")
    limits = limits if limits is not None else XmlLimits.from_env()
    parser = etree.XMLPullParser(events=("start",), tag=list(stream_tags) or _NO_TAG, resolve_entities=False,
                                 no_network=True, load_dtd=False, huge_tree=True, remove_comments=True,
                                 remove_pis=True)
    decoder = EntityDecoder()
    root: etree._Element | None = None
    elements = 0

    def complete(final: bool) -> Iterator[tuple[etree._Element, etree._Element | None]]:
        """The root's children that are complete (all but the last one, which may still be open, unless final)."""
        children = list(root) if final else list(root)[:-1]
        for child in children:
            if decoder.declared:
                _unexpanded(child, name)
            if isinstance(child.tag, str):
                yield root, child
            root.remove(child)

    try:
        for chunk in _chunks(source, name, limits):
            elements += _elements(chunk)
            if elements > limits.max_elements:
                raise XmlReadError(name, f"holds more than {limits.max_elements:,} elements, the limit "
                                         "(VISTA_XML_MAX_ELEMENTS)")
            parser.feed(decoder.feed(chunk))
            if root is None:
                root = next((node for _, node in parser.read_events() if node.getparent() is None), None)
            if root is not None:
                yield from complete(False)
        parser.feed(decoder.close())
        document = parser.close()
    except etree.XMLSyntaxError as exc:
        message = re.sub(r",? line \d+, column \d+", "", str(exc.msg or exc)).strip() or "syntax error"
        raise XmlReadError(name, f"not well-formed XML ({message})", line=exc.lineno or None) from None
    if root is not None:
        yield from complete(True)
    else:
        root = document
    if decoder.declared:
        _unexpanded(root, name)
    yield root, None


def parse_xml(source: Path | bytes, *, name: str | None = None, limits: XmlLimits | None = None) -> etree._Element:
    """The root element of the whole document at ``source`` (entities decoded, limits applied; see `stream_xml`)."""
    for root, _ in stream_xml(source, name=name, limits=limits):
        pass
    return root
