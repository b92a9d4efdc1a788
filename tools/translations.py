"""The book in another language, from the same executed notebooks.

A translation is data: for each English page, ``i18n/<lang>/<page path>.md`` holds the
translated *units* of that page, each with a fingerprint (``sha``) of the English text
it translates::

    <!-- unit 3f2a9c1e sha=5d41402abc4b -->
    翻译后的 Markdown ……

A unit is a notebook's markdown cell (its cell id), a figure's caption or alt text in a
code cell's metadata (``<cell id>/caption``, ``<cell id>/alt``), the message of a
checker's feedback box in an output (``<cell id>/feedback<k>``), a glued value that is
words, not a number (``<cell id>/glue:<name>``: "this CPU"), or a block of a
Markdown page (``p<k>``: text between blank lines, a fenced directive or table whole).
The title, footer and the table of contents' captions are the units of ``_book``.
A unit marked ``todo`` holds English still to translate.

``generate`` writes the translated book under ``<lang>/``: a ``_config.yml`` and
``_toc.yml`` of its own, each translated Markdown page, and each translated notebook,
whose code cells, outputs and glued values are the English notebook's, byte for byte
(only a feedback box's message and a glued value in words are translated; their
numbers are the English ones). A page outside the scope gets a
page saying, in the language, that it is not translated yet, with a link to the English
page. Nothing is executed: the English notebooks' outputs are the translation's.

Commands (``python tools/translations.py COMMAND [--lang zh]``):

``status``
    Per page: how many units are translated, and each unit that is missing, still
    ``todo``, or stale (its English changed after it was translated), by id and first
    words. Exit status 1 if a page in scope is not complete.
``init``
    Add a ``todo`` unit holding the English for every unit a page lacks (and rewrite
    each unit file in the page's order), for a translator to fill in.
``generate``
    Write ``<lang>/`` from the English pages and the units.
``check``
    ``status``, and whether ``<lang>/`` is what ``generate`` would write.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
I18N = ROOT / "i18n"
BOOK = "_book"  # the pseudo-page of the title, footer and captions
UNIT_LINE = re.compile(r"^<!-- unit (\S+) sha=([0-9a-f]{12})( todo)? -->$")
FEEDBACK = '<div class="feedback'


def caption_id(caption: str) -> str:
    return "caption:" + re.sub(r"\W+", "-", caption).strip("-").lower()


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


# ---------------------------------------------------------------- what needs words
_NO_WORDS = [
    re.compile(r"^\s*(`{3,}|:{3,}).*$", re.M),  # fences
    re.compile(r"^\([\w-]+\)=\s*$", re.M),  # labels
    re.compile(r"^\s*:[\w-]+:.*$", re.M),  # directive options
    re.compile(r"\$\$.*?\$\$", re.S),  # display maths
    re.compile(r"\$[^$\n]+\$"),  # inline maths
    re.compile(r"\{[\w:-]+\}`[^`]*`"),  # roles: {doc}`...`, {glue:text}`...`
    re.compile(r"`[^`\n]*`"),  # code
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"https?://\S+"),
]


def has_words(text: str) -> bool:
    """Whether ``text`` holds words to translate (not only maths, code, labels)."""
    for pattern in _NO_WORDS:
        text = pattern.sub(" ", text)
    return re.search(r"[A-Za-z]{2,}", text) is not None


# ---------------------------------------------------------------- units of a page
@dataclass
class Unit:
    id: str
    english: str

    @property
    def sha(self) -> str:
        return fingerprint(self.english)


def markdown_blocks(text: str) -> list[str]:
    """Blocks of a Markdown page: runs of lines between blank lines, a fenced block
    (```` ``` ```` or ``:::``, nested or not) and front matter kept whole."""
    lines = text.split("\n")
    blocks, current, fences = [], [], []
    i = 0
    if lines and lines[0] == "---":  # front matter
        end = lines.index("---", 1)
        blocks.append("\n".join(lines[: end + 1]))
        i = end + 1
    for line in lines[i:]:
        stripped = line.strip()
        opening = re.match(r"^(`{3,}|:{3,})\S", stripped)
        if fences and stripped == fences[-1]:
            fences.pop()
        elif opening:
            fences.append(opening.group(1))
        if not stripped and not fences:
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def feedback_message(output: dict) -> str | None:
    """The message of a checker's feedback box (without its mark), or None."""
    data = output.get("data", {})
    html = data.get("text/html")
    if not html:
        return None
    html = "".join(html) if isinstance(html, list) else html
    if not html.startswith(FEEDBACK):
        return None
    plain = data.get("text/plain", "")
    plain = "".join(plain) if isinstance(plain, list) else plain
    return re.sub(r"^[\u2713\u2717] ", "", plain)


GLUE = "application/papermill.record/"


def glued_text(output: dict) -> tuple[str, str] | None:
    """``(mime type, text)`` of a glued value that is words (a string or Markdown, not
    a number or True), or None."""
    if "scrapbook" not in output.get("metadata", {}):
        return None
    data = output.get("data", {})
    for mime in (GLUE + "text/markdown", GLUE + "text/plain"):
        value = data.get(mime)
        if value is None:
            continue
        value = "".join(value) if isinstance(value, list) else value
        if mime.endswith("plain"):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return None
            if not isinstance(value, str):
                return None
        return (mime, value) if has_words(value) else None
    return None


def notebook_units(notebook: dict) -> list[Unit]:
    units = []
    for cell in notebook["cells"]:
        cid = cell["id"]
        if cell["cell_type"] == "markdown":
            units.append(Unit(cid, _source(cell)))
            continue
        if cell["cell_type"] != "code":
            continue
        mystnb = cell.get("metadata", {}).get("mystnb", {})
        if mystnb.get("figure", {}).get("caption"):
            units.append(Unit(f"{cid}/caption", mystnb["figure"]["caption"]))
        if mystnb.get("image", {}).get("alt"):
            units.append(Unit(f"{cid}/alt", mystnb["image"]["alt"]))
        for k, output in enumerate(cell.get("outputs", [])):
            message = feedback_message(output)
            if message is not None:
                units.append(Unit(f"{cid}/feedback{k}", message))
            glued = glued_text(output)
            if glued is not None:
                name = output["metadata"]["scrapbook"]["name"]
                units.append(Unit(f"{cid}/glue:{name}", glued[1]))
    return [unit for unit in units if has_words(unit.english)]


def page_units(path: str, english: str, partial: str | None = None) -> list[Unit]:
    """The units of the English page ``path`` (its text ``english``). ``partial``: only
    the blocks before the first line that starts with it are translated."""
    if path.endswith(".ipynb"):
        return notebook_units(json.loads(english))
    units = []
    for k, block in enumerate(markdown_blocks(english)):
        if partial and block.startswith(partial):
            break
        if k == 0 and block.startswith("---\n"):
            continue  # front matter: settings, not text
        if has_words(block):
            units.append(Unit(f"p{k}", block))
    return units


# ---------------------------------------------------------------- translation files
@dataclass
class Translation:
    id: str
    sha: str
    text: str
    todo: bool = False


def read_translations(path: Path) -> list[Translation]:
    if not path.is_file():
        return []
    found: list[Translation] = []
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        match = UNIT_LINE.match(line)
        if match:
            if found:
                found[-1].text = "\n".join(lines).strip("\n")
            found.append(Translation(match[1], match[2], "", bool(match[3])))
            lines = []
        elif found:
            lines.append(line)
        elif line.strip():
            raise ValueError(f"{path}: text before the first unit line: {line!r}")
    if found:
        found[-1].text = "\n".join(lines).strip("\n")
    return found


def write_translations(path: Path, translations: list[Translation]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for t in translations:
        flag = " todo" if t.todo else ""
        parts.append(f"<!-- unit {t.id} sha={t.sha}{flag} -->\n{t.text.strip()}\n")
    path.write_text("\n".join(parts), encoding="utf-8")


@dataclass
class PageStatus:
    page: str
    in_scope: bool
    units: list[Unit]
    done: dict[str, Translation] = field(default_factory=dict)  # unit id -> current
    stale: dict[str, Translation] = field(default_factory=dict)  # unit id -> old one
    todo: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not (self.stale or self.todo or self.missing)


def match(
    units: list[Unit], translations: list[Translation], page: str, in_scope: bool
) -> PageStatus:
    """Pair each unit with its translation: by id and fingerprint; a Markdown block
    also by fingerprint alone (blocks move when one is added above them)."""
    status = PageStatus(page, in_scope, units)
    by_id = {t.id: t for t in translations}
    by_sha = {t.sha: t for t in translations if not t.todo}
    current = {unit.sha for unit in units}
    for unit in units:
        t = by_id.get(unit.id)
        if t is not None and t.sha == unit.sha:
            (
                status.todo.append(unit.id)
                if t.todo
                else status.done.__setitem__(unit.id, t)
            )
        elif unit.id.startswith("p") and unit.sha in by_sha:
            status.done[unit.id] = by_sha[unit.sha]
        elif t is not None and not t.todo and t.sha not in current:
            status.stale[unit.id] = t  # (a translation that moved is not stale here)
        else:
            status.missing.append(unit.id)
    return status


# ---------------------------------------------------------------- the book
class Book:
    def __init__(self, lang: str = "zh", root: Path = ROOT):
        self.lang = lang
        self.root = root
        self.i18n = root / "i18n" / lang
        self.settings = yaml.safe_load((self.i18n / "settings.yml").read_text("utf-8"))
        self.config = yaml.safe_load((root / "_config.yml").read_text("utf-8"))
        self.toc = yaml.safe_load((root / "_toc.yml").read_text("utf-8"))
        self.out = root / lang

    # pages ----------------------------------------------------------------
    def pages(self) -> list[str]:
        """Every page of the English table of contents, as a path with its suffix."""
        names = [self.toc["root"]]

        def walk(entries):
            for entry in entries:
                if "file" in entry:
                    names.append(entry["file"])
                walk(entry.get("sections", []) + entry.get("chapters", []))

        walk(self.toc.get("parts", []))
        paths = []
        for name in names:
            for suffix in (".ipynb", ".md"):
                if (self.root / (name + suffix)).is_file():
                    paths.append(name + suffix)
                    break
            else:
                raise FileNotFoundError(
                    f"_toc.yml names {name}, which has no .ipynb or .md"
                )
        return paths

    def scope(self) -> list[str]:
        return list(self.settings["scope"])

    def translation_file(self, page: str) -> Path:
        return self.i18n / f"{page}.md"

    def book_units(self) -> list[Unit]:
        units = [
            Unit("title", self.config["title"]),
            Unit("footer", self.config["html"]["extra_footer"]),
        ]
        for part in self.toc.get("parts", []):
            units.append(Unit(caption_id(part["caption"]), part["caption"]))
        return units

    def units(self, page: str) -> list[Unit]:
        if page == BOOK:
            return self.book_units()
        english = (self.root / page).read_text(encoding="utf-8")
        return page_units(page, english, self.settings.get("partial", {}).get(page))

    def status(self, page: str) -> PageStatus:
        in_scope = page == BOOK or page in self.scope()
        return match(
            self.units(page),
            read_translations(self.translation_file(page)),
            page,
            in_scope,
        )

    def all_status(self) -> list[PageStatus]:
        return [self.status(BOOK)] + [
            self.status(page) for page in self.pages() if page in self.scope()
        ]

    # init -----------------------------------------------------------------
    def init(self, page: str) -> int:
        """Give every unit of ``page`` a translation entry (English + todo where there
        is none), in the page's order. Returns the number added."""
        status = self.status(page)
        entries, added = [], 0
        for unit in status.units:
            if unit.id in status.done:
                t = status.done[unit.id]
                entries.append(Translation(unit.id, unit.sha, t.text))
            elif unit.id in status.stale:  # kept for the translator, marked todo
                entries.append(
                    Translation(
                        unit.id, unit.sha, status.stale[unit.id].text, todo=True
                    )
                )
            else:
                old = {t.id: t for t in read_translations(self.translation_file(page))}
                text = old[unit.id].text if unit.id in old else unit.english
                entries.append(Translation(unit.id, unit.sha, text, todo=True))
                added += 1
        write_translations(self.translation_file(page), entries)
        return added

    # generate -------------------------------------------------------------
    def text(self, page: str) -> dict[str, str]:
        """Unit id -> the text to show: the translation, else the English."""
        status = self.status(page)
        shown = {unit.id: unit.english for unit in status.units}
        for uid, t in status.done.items():
            shown[uid] = t.text
        return shown

    def translated_notebook(self, page: str) -> dict:
        from attention_lib.exercises._feedback import _inline_code

        notebook = json.loads((self.root / page).read_text(encoding="utf-8"))
        result = copy.deepcopy(notebook)
        shown = self.text(page)
        for cell in result["cells"]:
            cid = cell["id"]
            if cell["cell_type"] == "markdown" and cid in shown:
                cell["source"] = shown[cid].splitlines(keepends=True)
            mystnb = cell.get("metadata", {}).get("mystnb", {})
            if f"{cid}/caption" in shown:
                mystnb["figure"]["caption"] = shown[f"{cid}/caption"]
            if f"{cid}/alt" in shown:
                mystnb["image"]["alt"] = shown[f"{cid}/alt"]
            for k, output in enumerate(cell.get("outputs", [])):
                glued = glued_text(output)
                if glued is not None:
                    uid = f"{cid}/glue:{output['metadata']['scrapbook']['name']}"
                    mime, _ = glued
                    text = shown.get(uid, glued[1])
                    output["data"][mime] = (
                        text if mime.endswith("markdown") else repr(text)
                    )
                uid = f"{cid}/feedback{k}"
                if uid not in shown:
                    continue
                english = feedback_message(output)
                data = output["data"]
                html = (
                    "".join(data["text/html"])
                    if isinstance(data["text/html"], list)
                    else data["text/html"]
                )
                plain = (
                    "".join(data["text/plain"])
                    if isinstance(data["text/plain"], list)
                    else data["text/plain"]
                )
                old, new = _inline_code(english), _inline_code(shown[uid])
                if old not in html:
                    raise ValueError(f"{page} {uid}: the box does not hold its message")
                data["text/html"] = html.replace(old, new)
                data["text/plain"] = plain[: len(plain) - len(english)] + shown[uid]
        result["metadata"].setdefault("attention_book", {})["language"] = self.lang
        return result

    def translated_markdown(self, page: str) -> str:
        english = (self.root / page).read_text(encoding="utf-8")
        shown = self.text(page)
        blocks = markdown_blocks(english)
        out = []
        for k, block in enumerate(blocks):
            out.append(shown.get(f"p{k}", block))
        # Blocks are joined by one blank line, as they are split.
        return "\n\n".join(out) + "\n"

    def untranslated_page(self, page: str) -> str:
        """A page saying it is not translated yet, with the English page's labels (so
        references to them resolve) and a link to it."""
        english = (self.root / page).read_text(encoding="utf-8")
        if page.endswith(".ipynb"):
            notebook = json.loads(english)
            english = "\n\n".join(
                _source(c) for c in notebook["cells"] if c["cell_type"] == "markdown"
            )
        title = re.search(r"^# (.+)$", english, re.M)
        labels = re.findall(r"^\(([\w-]+)\)=\s*$", english, re.M)
        depth = page.count("/")
        url = "../" * (depth + 1) + re.sub(r"\.(ipynb|md)$", ".html", page)
        lines = [f"({label})=" for label in labels]
        lines.append(f"# {title[1] if title else page}")
        lines.append("")
        lines.append(self.settings["untranslated"].replace("{url}", url).strip())
        return "\n".join(lines) + "\n"

    def config_yml(self) -> dict:
        config = copy.deepcopy(self.config)
        shown = self.text(BOOK)
        config["title"] = shown["title"]
        config["html"]["extra_footer"] = shown["footer"]
        config["author"] = self.settings["author"]
        config["repository"]["path_to_book"] = self.lang
        config["html"]["favicon"] = "../" + config["html"]["favicon"]
        # A page here is generated: its source to edit is the English page or i18n/.
        config["html"]["use_edit_page_button"] = False
        config["bibtex_bibfiles"] = ["../" + p for p in config["bibtex_bibfiles"]]
        sphinx = config["sphinx"]
        sphinx["local_extensions"] = {
            name: "../" + path for name, path in sphinx["local_extensions"].items()
        }
        sphinx["config"]["language"] = self.settings["sphinx_language"]
        sphinx["config"]["book_language"] = self.lang
        sphinx["config"].update(self.settings.get("sphinx_config", {}))
        return config

    def toc_yml(self) -> dict:
        toc = copy.deepcopy(self.toc)
        shown = self.text(BOOK)
        for part in toc.get("parts", []):
            part["caption"] = shown[caption_id(part["caption"])]
        return toc

    def generated(self) -> dict[Path, str]:
        """Every file of ``<lang>/``, path -> text."""
        header = (
            f"# Generated by tools/translations.py from the English book and "
            f"i18n/{self.lang}/: do not edit.\n"
        )
        files = {
            self.out / "_config.yml": header
            + yaml.safe_dump(
                self.config_yml(), allow_unicode=True, sort_keys=False, width=1000
            ),
            self.out / "_toc.yml": header
            + yaml.safe_dump(
                self.toc_yml(), allow_unicode=True, sort_keys=False, width=1000
            ),
        }
        for page in self.pages():
            if page not in self.scope():
                name = re.sub(r"\.ipynb$", ".md", page)
                files[self.out / name] = self.untranslated_page(page)
            elif page.endswith(".ipynb"):
                files[self.out / page] = (
                    json.dumps(
                        self.translated_notebook(page), indent=1, ensure_ascii=False
                    )
                    + "\n"
                )
            else:
                files[self.out / page] = self.translated_markdown(page)
        return files

    def generate(self) -> list[Path]:
        files = self.generated()
        written = []
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
                written.append(path)
        expected = set(files)
        for path in self.out.rglob("*"):
            if path.is_file() and path not in expected and "_build" not in path.parts:
                path.unlink()
                written.append(path)
        return written

    def outdated(self) -> list[str]:
        """Files of ``<lang>/`` that differ from what ``generate`` would write."""
        wrong = []
        files = self.generated()
        for path, text in files.items():
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                wrong.append(str(path.relative_to(self.root)))
        for path in self.out.rglob("*"):
            if path.is_file() and path not in files and "_build" not in path.parts:
                wrong.append(str(path.relative_to(self.root)) + " (not generated)")
        return wrong


def first_words(text: str, n: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= n else line[: n - 1] + "…"


def report(book: Book) -> bool:
    complete = True
    for status in book.all_status():
        n = len(status.units)
        print(
            f"{status.page}: {len(status.done)}/{n} translated"
            + ("" if status.complete else " (NOT COMPLETE)")
        )
        english = {unit.id: unit.english for unit in status.units}
        for kind, ids in (
            ("stale", list(status.stale)),
            ("todo", status.todo),
            ("missing", status.missing),
        ):
            for uid in ids:
                print(f"  {kind:8} {uid}: {first_words(english[uid])}")
        complete &= status.complete
    return complete


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["status", "init", "generate", "check"])
    parser.add_argument("--lang", default="zh")
    parser.add_argument("pages", nargs="*", help="init: only these pages")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    book = Book(args.lang)
    if args.command == "status":
        return 0 if report(book) else 1
    if args.command == "init":
        for page in args.pages or [BOOK, *book.scope()]:
            print(f"{page}: {book.init(page)} units added")
        return 0
    if args.command == "generate":
        for path in book.generate():
            print("wrote", path.relative_to(book.root))
        return 0
    ok = report(book)
    wrong = book.outdated()
    for path in wrong:
        print(
            f"not current: {path} (run: python tools/translations.py generate "
            f"--lang {args.lang})"
        )
    return 0 if ok and not wrong else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
