"""The site's own scripts: served from the site itself (offline), each loaded once.

jupyter-book 1.x loads MathJax 3 from a CDN, and myst-nb loads RequireJS and the
ipywidgets HTML manager from CDNs on pages with saved widget state. ``_config.yml``
points those at ``_static/vendor/...`` instead (``mathjax_path`` and
``nb_ipywidgets_js``); this extension puts the files there. They come from the npm
registry, pinned by ``book/_vendor/package-lock.json`` and installed by ``make book``
(``npm ci --prefix book/_vendor``), never committed.

    _static/vendor/mathjax/        <- node_modules/mathjax/es5/ (tex-mml-chtml.js,
        fonts, extensions)
    _static/vendor/requirejs/      <- node_modules/requirejs/require.js
    _static/vendor/html-manager/   <- node_modules/@jupyter-widgets/html-manager/dist/
        (embed-amd.js, fonts)
    _static/vendor/ipywidgets-offline.js <- book/_static/ipywidgets-offline.js (loaded
        first on widget
                                    pages: points the manager at its fonts, bridges
                                        MathJax 2 calls to 3)
    _static/vendor/book.css        <- book/_static/book.css (ours, on every page:
        88-character code
                                    blocks, pages usable 400 px wide)
    _static/vendor/onnxruntime-web/ <- node_modules/onnxruntime-web/dist/: only
        ort.wasm.min.mjs and its WebAssembly build (ort-wasm-simd-threaded.mjs,
        .wasm), not the default entry's WebGPU build
    _static/translator.js          <- book/_static/translator.js (ours: the page
        "Translate in your browser")
    _static/translator/            <- book/_static/translator/ (the exported model,
        written by tools/export_translator.py and committed)

The translator's two ONNX programs and onnxruntime's WebAssembly are also written
gzipped, as ``NAME.gz`` beside each file: GitHub Pages, the site's host, sends
``.onnx`` files as ``application/octet-stream``, uncompressed, so the page fetches the
``.gz`` files and unpacks them itself (``DecompressionStream``). The size of the whole
download is computed here from those files and written into the page where it has
``<span class="translator-download-size">`` (with the per-file sizes the page's
progress bar needs), so the page states it before it starts loading.

It also drops duplicate inline scripts. Sphinx 7.4 registers an inline script added
during the build (``app.add_js_file(None, body=...)``) twice, once as ``None`` and once
as ``''``; sphinx-thebe's ``const THEBE_JS_URL = ...`` then runs twice and every page
logs "Identifier 'THEBE_JS_URL' has already been declared".
"""
from __future__ import annotations

import gzip
import html
import json
import os
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

VENDOR = Path(__file__).resolve().parents[1] / "_vendor"
NODE_MODULES = VENDOR / "node_modules"
ORT_DIST = NODE_MODULES / "onnxruntime-web" / "dist"
OURS = VENDOR.parent / "_static"

# (source, destination under _static, names to skip)
ASSETS = [
    (NODE_MODULES / "mathjax" / "es5", "vendor/mathjax", ()),
    (NODE_MODULES / "requirejs" / "require.js", "vendor/requirejs/require.js", ()),
    (
        NODE_MODULES / "@jupyter-widgets" / "html-manager" / "dist",
        "vendor/html-manager",
        ("*.map", "embed.js", "embed.js.*"),
    ),
    # Ours: sets the widget manager's asset path and bridges ipywidgets' MathJax 2 calls
    # to MathJax 3.
    (OURS / "ipywidgets-offline.js", "vendor/ipywidgets-offline.js", ()),
    # Ours: the book's layout rules (code width, narrow screens), loaded after the
    # theme's CSS.
    (OURS / "book.css", "vendor/book.css", ()),
    # Ours: search results show mathematics as plain text, not TeX.
    (OURS / "search-math.js", "vendor/search-math.js", ()),
    # onnxruntime-web's WebAssembly build for the translator page: the ES module and
    # the runtime it loads (single-threaded: GitHub Pages sends no cross-origin
    # isolation headers), not the 28 MB WebGPU build the package's default entry pulls.
    # book/_vendor/package.json pins onnxruntime-web 1.22.0: its WebAssembly is 2.87
    # MB gzipped, 1.30.0's 3.65 MB, and at 10 Mbit/s that took the first translation
    # from 8.2 s to 7.5 s (bench/bench_translator_page.py; later releases are larger).
    *(
        (ORT_DIST / name, f"vendor/onnxruntime-web/{name}", ())
        for name in (
            "ort.wasm.min.mjs",
            "ort-wasm-simd-threaded.mjs",
            "ort-wasm-simd-threaded.wasm",
        )
    ),
    # Ours: the page "Translate in your browser", and the model it runs.
    (OURS / "translator.js", "translator.js", ()),
    (OURS / "translator", "translator", ()),
]


# The translator page's download: what it fetches, under _static.
TRANSLATOR = OURS / "translator"
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs")
ORT_WASM = "ort-wasm-simd-threaded.wasm"
SIZE_MARK = re.compile(r'<span class="translator-download-size"[^>]*>[^<]*</span>')
# Types GitHub Pages sends gzipped itself (its CDN compresses text, JavaScript and
# JSON); everything else goes out as it is.
HOST_GZIPS = (".js", ".mjs", ".json")


def _gzip(raw: bytes) -> bytes:
    return gzip.compress(raw, 9, mtime=0)


def _translator_download() -> tuple[dict, dict]:
    """The files the translator page downloads, and the gzipped copies to write.

    Returns ``(download, packed)``: ``download["files"]`` maps each path under _static
    to its size (``bytes``), what travels (``sent``: the ``.gz`` copy's size for the
    programs and the WebAssembly, gzip's size for what the host compresses) and whether
    the page fetches a ``.gz`` copy (``packed``); ``download["sent"]`` is the total.
    ``packed`` maps each ``.gz`` path under _static to its bytes.
    """
    settings = json.loads((TRANSLATOR / "translator.json").read_text(encoding="utf-8"))
    sources = {
        "translator.js": OURS / "translator.js",
        "translator/translator.json": TRANSLATOR / "translator.json",
        "translator/provenance.json": TRANSLATOR / "provenance.json",
        **{f"vendor/onnxruntime-web/{name}": ORT_DIST / name for name in ORT_FILES},
    }
    heavy = {
        f"vendor/onnxruntime-web/{ORT_WASM}": ORT_DIST / ORT_WASM,
        **{f"translator/{settings[key]}": TRANSLATOR / settings[key]
           for key in ("encoder", "decoder_step")},
    }
    files, packed = {}, {}
    for dest, source in sources.items():
        if not source.exists():
            continue
        raw = source.read_bytes()
        sent = len(_gzip(raw)) if dest.endswith(HOST_GZIPS) else len(raw)
        files[dest] = {"bytes": len(raw), "sent": sent, "packed": False}
    for dest, source in heavy.items():
        raw = source.read_bytes()
        packed[dest + ".gz"] = _gzip(raw)
        files[dest] = {"bytes": len(raw), "sent": len(packed[dest + ".gz"]),
                       "packed": True}
    download = {"files": files, "sent": sum(f["sent"] for f in files.values())}
    return download, packed


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _pack_translator(app: Sphinx) -> None:
    """Gzip the translator's heavy files once a build (written at the end)."""
    if app.builder.format != "html":
        return
    app._translator_download = _translator_download()


def _state_download_size(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Write the download's size, and each file's, where the page marks it."""
    body = context.get("body")
    found = getattr(app, "_translator_download", None)
    if (not isinstance(body, str) or found is None
            or "translator-download-size" not in body):
        return
    download = found[0]
    span = ('<span class="translator-download-size" data-download="'
            f'{html.escape(json.dumps(download), quote=True)}">'
            f"{_megabytes(download['sent'])}</span>")
    context["body"] = SIZE_MARK.sub(lambda _: span, body)


def _translator_pages(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Pages that state the download size are rewritten every build: the files they
    describe may have changed when they did not."""
    return [doc for doc in env.found_docs if doc not in added | changed
            and "translator-download-size" in _source_text(env, doc)]


def _source_text(env, docname: str) -> str:
    path = Path(env.doc2path(docname))
    if path.suffix != ".md":  # the marker is raw HTML in a MyST page
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _check_installed(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    missing = [str(source) for source, _, _ in ASSETS if not source.exists()]
    if missing:
        raise ExtensionError(
            "The site's offline JavaScript is not installed (missing:"
            f" {', '.join(missing)}). Run `make book`, or `npm ci --prefix"
            " book/_vendor` before `jupyter-book build .`; the translator's model"
            " files come from `python tools/export_translator.py`."
        )


def _copy_assets(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for source, dest, skip in ASSETS:
        target = static / dest
        if source.is_dir():
            shutil.copytree(
                source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*skip)
            )
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    found = getattr(app, "_translator_download", None)
    if found is not None:
        for dest, packed in found[1].items():
            (static / dest).write_bytes(packed)


def _drop_duplicate_scripts(
    app: Sphinx, pagename, templatename, context, doctree
) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, unique = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {})
        key = (
            os.fspath(getattr(script, "filename", None) or ""),
            getattr(script, "priority", None),
            tuple(sorted((name, str(value)) for name, value in attributes.items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app: Sphinx) -> dict:
    app.add_css_file("vendor/book.css", priority=900)
    app.add_js_file("vendor/search-math.js", priority=900)
    app.connect("builder-inited", _check_installed)
    app.connect("builder-inited", _pack_translator)
    app.connect("env-get-outdated", _translator_pages)
    app.connect("html-page-context", _state_download_size)
    # after myst-nb's
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    app.connect("build-finished", _copy_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
