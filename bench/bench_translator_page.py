"""The page "Translate in your browser" in headless Chromium: how long a reader waits,
and how much the page downloads.

    python -m bench.bench_translator_page            # after `make book`; about a minute
    python -m bench.bench_translator_page --smoke    # one load, one translation

1. **First translation.** From navigation to the page's first sentence translated and
   drawn, model download and onnxruntime-web's start included, with the browser's cache
   off (a first visit). The site is served from 127.0.0.1, so this is the time of the
   reader's CPU, not of their network; the download time at a few link speeds follows
   from part 3. Goal: at most 3 s.
2. **Each translation after that**, for a 10-word sentence: the encoder once and the
   cached decoder step once per output word, with the page's DOM updates after every
   word, as the page measures it (median over rounds). Goal: at most 300 ms.
3. **Download**, as a server that compresses would send it: every file the translator
   adds to the page (the model's ONNX files and JSON, onnxruntime-web's module and
   WebAssembly, the page's script), each compressed with gzip -9. Goal: at most 10 MB.

The times depend on the machine (and on what else it runs); the download does not.
"""
from __future__ import annotations

import functools
import gzip
import http.server
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from bench import SMOKE_NOTE, smoke_mode

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
PAGE = "chapters/05_transformer/06_translate_in_browser.html"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SENTENCE = "My mother is cooking dinner in the kitchen with Tom."  # 10 words
GOAL_FIRST_S, GOAL_EACH_MS, GOAL_DOWNLOAD_MB = 3.0, 300.0, 10.0
LINKS_MBIT = (10, 50)

WAIT_READY = """
const done = arguments[arguments.length - 1];
const wait = () => window.translatorPage
    ? translatorPage.ready.then(
        () => done({loaded: translatorPage.loadedAt,
                    first: translatorPage.firstTranslationAt,
                    words: translatorPage.last.output.split(' ').length}),
        (e) => done({error: String(e)}))
    : setTimeout(wait, 20);
wait();
"""
TRANSLATE = """
const done = arguments[arguments.length - 1];
translatorPage.translate(arguments[0]).then(done, (e) => done({error: String(e)}));
"""


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".wasm": "application/wasm"}

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def serve(directory: Path) -> tuple[http.server.HTTPServer, str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def chromium(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-extensions",
                 "--no-first-run", "--window-size=1280,900",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options,
                              service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_script_timeout(120)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    return driver


def translator_files() -> list[Path]:
    static = SITE / "_static"
    return [*sorted((static / "translator").iterdir()), static / "translator.js",
            *sorted((static / "vendor" / "onnxruntime-web").iterdir())]


def bench_download(files: list[Path], smoke: bool) -> None:
    print("\n3. Download, each file gzip -9 (as a compressing server sends it)")
    total = 0
    for path in files:
        raw = path.read_bytes()
        packed = len(gzip.compress(raw, 9))
        total += packed
        print(f"  {str(path.relative_to(SITE)):58} {len(raw) / 1e6:6.2f} MB"
              f" -> {packed / 1e6:5.2f} MB")
    verdict = "" if smoke else (" (met)" if total / 1e6 <= GOAL_DOWNLOAD_MB
                                else " (NOT met)")
    print(f"  total {total / 1e6:.2f} MB gzipped; goal <= {GOAL_DOWNLOAD_MB:.0f} MB"
          f"{verdict}")
    for mbit in LINKS_MBIT:
        print(f"  at {mbit} Mbit/s that is {total * 8 / (mbit * 1e6):.1f} s of download")


def main(argv) -> None:
    smoke = smoke_mode(argv)
    if smoke:
        print(SMOKE_NOTE)
    missing = [str(p) for p in (SITE / PAGE, CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        message = (f"needs the built site (`make book`) and Chromium; missing:"
                   f" {', '.join(missing)}")
        if smoke:  # the smoke run checks that the benchmark runs where it can
            print(message)
            return
        sys.exit(message)
    loads, rounds = (1, 1) if smoke else (3, 10)
    server, base = serve(SITE)
    try:
        with tempfile.TemporaryDirectory() as profile:
            driver = chromium(profile)
            try:
                first, loaded, words = [], [], 0
                for _ in range(loads):
                    driver.get(base + PAGE)
                    ready = driver.execute_async_script(WAIT_READY)
                    if "error" in ready:
                        sys.exit(f"the page failed: {ready['error']}")
                    first.append(ready["first"] / 1000)
                    loaded.append(ready["loaded"] / 1000)
                    words = ready["words"]
                each = []
                for i in range(rounds + (0 if smoke else 1)):
                    result = driver.execute_async_script(TRANSLATE, SENTENCE)
                    if result.get("state") != "done":
                        sys.exit(f"the translation failed: {result}")
                    if smoke or i > 0:  # the first is a warm-up
                        each.append(result["ms"])
                output = result["output"]
            finally:
                driver.quit()
    finally:
        server.shutdown()
        server.server_close()
    print(f"Chromium headless, one WebAssembly thread; {loads} first visits with the"
          f" cache off, then {rounds} translations")
    print("\n1. Navigation to the first translation drawn (the page's own sentence,"
          f" {words} output words)")
    print(f"  model loaded after {statistics.median(loaded):.2f} s; first translation"
          f" after {statistics.median(first):.2f} s (median; range"
          f" {min(first):.2f}-{max(first):.2f} s)")
    if not smoke:
        met = "met" if statistics.median(first) <= GOAL_FIRST_S else "NOT met"
        print(f"  goal <= {GOAL_FIRST_S:.0f} s: {met}")
    print(f"\n2. Each translation of a 10-word sentence: {SENTENCE!r} -> {output!r}")
    print(f"  median {statistics.median(each):.0f} ms (range {min(each):.0f}-"
          f"{max(each):.0f} ms over {len(each)})")
    if not smoke:
        met = "met" if statistics.median(each) <= GOAL_EACH_MS else "NOT met"
        print(f"  goal <= {GOAL_EACH_MS:.0f} ms: {met}")
    bench_download(translator_files(), smoke)


if __name__ == "__main__":
    main(sys.argv[1:])
