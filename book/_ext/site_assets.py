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

It also drops duplicate inline scripts. Sphinx 7.4 registers an inline script added
during the build (``app.add_js_file(None, body=...)``) twice, once as ``None`` and once
as ``''``; sphinx-thebe's ``const THEBE_JS_URL = ...`` then runs twice and every page
logs "Identifier 'THEBE_JS_URL' has already been declared".
"""
from __future__ import annotations

import os
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
    # after myst-nb's
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    app.connect("build-finished", _copy_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
