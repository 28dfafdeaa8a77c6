"""Which patient XML files a directory holds: the one discovery rule of ``vista graph --xml-dir`` and ``vista build
--xml-dir`` / ``jobs.build_graphs``, and the check that no two files hold the same patient.

**Discovery.** Every file whose name ends in ``.xml``, in the directory and all its subfolders (symbolic links to
files are followed, links to folders are not, so a link loop cannot trap the walk), in the order of their paths
relative to the directory (POSIX form, byte order): the same list on every machine and every run.

**One patient, one file.** Each file's subject id is read from its root element alone (``<patient id>`` or
``<eventstream person_id>``; the rest of the file is not parsed). Two files with the same id are an error naming
both (`XmlDirectoryError`), unless ``on_duplicate="first"``, which keeps the first in path order and reports each
file it skips. A file whose root cannot be read keeps ``subject_id=None``; reading it later says what is wrong.

**A file is a task before anyone has read it** (a malformed file has no patient id to offer), so its task key
(`XmlFile.key`, for a cohort job's plan and outputs) has a ``subject_id`` derived from its relative path
(`file_key`: a stable 62-bit number); two files with one key are refused too.

>>> file_key("p/7.xml") == file_key("p/7.xml") != file_key("p/8.xml"), 0 < file_key("p/7.xml") < 2**62
(True, True)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lxml import etree

from vista.shared.errors import UserError
from vista.shared.meds.task_key import TaskKey
from vista.shared.xml_reading import EntityDecoder

OnDuplicate = Literal["error", "first"]
ON_DUPLICATE_CHOICES: tuple[OnDuplicate, ...] = ("error", "first")
_HEAD_BYTES = 1 << 16


class XmlDirectoryError(ValueError, UserError):
    """An XML directory cannot be used as given (missing, unreadable, empty, or two files for one patient)."""


@dataclass(frozen=True, slots=True)
class XmlFile:
    """One patient XML file of a directory."""

    path: Path
    relative: str  # POSIX path relative to the directory
    subject_id: int | None  # from the root element; None when it cannot be read there

    @property
    def key(self) -> TaskKey:
        """The file's task key (`file_key` of its relative path)."""
        return TaskKey(file_key(self.relative))


def file_key(relative_path: str) -> int:
    """A stable positive 62-bit key for an XML file (blake2b of its relative path; 0 is never returned)."""
    digest = hashlib.blake2b(relative_path.encode("utf-8"), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 2) or 1


def find_xml_files(directory: Path) -> list[tuple[Path, str]]:
    """(path, relative POSIX path) of every ``*.xml`` file under ``directory``, recursively, in relative-path order."""
    directory = Path(directory)
    try:
        directory.resolve()  # a symbolic link loop is named as one
        if not directory.is_dir():
            raise XmlDirectoryError(f"{directory}: not a directory")
    except RuntimeError as exc:  # Python < 3.13: "Symlink loop from …"
        raise XmlDirectoryError(f"{directory}: cannot be opened: a symbolic link loop ({exc})") from None
    except OSError as exc:
        raise XmlDirectoryError(f"{directory}: cannot be opened ({exc.strerror or exc})") from None

    def fail(exc: OSError) -> None:
        raise XmlDirectoryError(f"{exc.filename or directory}: cannot list the folder ({exc.strerror or exc})")

    found = []
    for folder, subfolders, names in os.walk(directory, onerror=fail, followlinks=False):
        subfolders.sort()
        for name in names:
            if name.endswith(".xml"):
                path = Path(folder) / name
                if path.is_file():
                    found.append((path, path.relative_to(directory).as_posix()))
    found.sort(key=lambda item: item[1].encode("utf-8", "surrogateescape"))
    if not found:
        raise XmlDirectoryError(f"{directory}: no *.xml patient files (searched recursively)")
    return found


def root_subject_id(path: Path) -> int | None:
    """The subject id on the root element of the XML file at ``path`` (None when it cannot be read there)."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError:
        return None
    parser = etree.XMLPullParser(events=("start",), resolve_entities=False, no_network=True, load_dtd=False,
                                 recover=False)
    try:
        parser.feed(EntityDecoder().feed(head))
        for _, node in parser.read_events():
            raw = node.get("person_id") if node.tag == "eventstream" else node.get("id")
            raw = (raw or "").strip()
            return int(raw) if raw.lstrip("-").isdigit() else None
    except etree.XMLSyntaxError:
        return None
    return None


def list_xml_patients(directory: Path, on_duplicate: OnDuplicate = "error") -> tuple[list[XmlFile], list[str]]:
    """The patient files under ``directory`` (see the module docstring) and one line per file skipped as a duplicate."""
    if on_duplicate not in ON_DUPLICATE_CHOICES:
        raise XmlDirectoryError(f"on_duplicate={on_duplicate!r}: choose one of {', '.join(ON_DUPLICATE_CHOICES)}")
    kept: list[XmlFile] = []
    skipped: list[str] = []
    owner: dict[int, XmlFile] = {}
    keys: dict[TaskKey, str] = {}
    for path, relative in find_xml_files(directory):
        file = XmlFile(path, relative, root_subject_id(path))
        other = keys.setdefault(file.key, relative)
        if other != relative:  # 62-bit keys: about one chance in 10^8 for a million files
            raise XmlDirectoryError(f"{directory}: files {other!r} and {relative!r} have the same task key; rename one")
        if file.subject_id is not None and file.subject_id in owner:
            first = owner[file.subject_id]
            if on_duplicate == "error":
                raise XmlDirectoryError(f"{first.path} and {file.path} both hold patient {file.subject_id}: keep one "
                                        "(or --on-duplicate first keeps the first in path order)")
            skipped.append(f"{file.path}: skipped, patient {file.subject_id} is already read from {first.path}")
            continue
        if file.subject_id is not None:
            owner[file.subject_id] = file
        kept.append(file)
    return kept, skipped
