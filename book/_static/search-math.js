/* Search results quote a few lines of each page, taken from the page's HTML before
 * MathJax has typeset it, so they showed TeX such as "\(D_s \times V\)". This rewrites
 * the TeX of a snippet into plain text ("Ds × V") before Sphinx's search shows it. */
(function () {
  const SYMBOLS = {
    "\\times": "×", "\\cdot": "·", "\\top": "ᵀ", "\\sqrt": "√", "\\sum": "Σ",
    "\\alpha": "α", "\\beta": "β", "\\omega": "ω", "\\theta": "θ", "\\mu": "μ",
    "\\sigma": "σ", "\\ell": "ℓ", "\\le": "≤", "\\leq": "≤", "\\ge": "≥",
    "\\geq": "≥", "\\approx": "≈", "\\to": "→", "\\infty": "∞", "\\dots": "…",
    "\\ldots": "…", "\\in": "∈", "\\log": "log", "\\exp": "exp", "\\max": "max",
    "\\lvert": "|", "\\rvert": "|", "\\mathcal": "", "\\mathbb": "", "\\text": "",
    "\\mathrm": "", "\\operatorname": "", "\\left": "", "\\right": "", "\\big": "",
    "\\Big": "", "\\,": " ", "\\!": "", "\\;": " ", "\\quad": " ", "\\qquad": " ",
  };
  function plain(tex) {
    return tex
      .replace(/\\[a-zA-Z]+|\\[,;!]/g, (command) =>
        command in SYMBOLS ? SYMBOLS[command] : command.slice(1))
      .replace(/[{}]/g, "")
      .replace(/\^(\S)/g, "$1")
      .replace(/_(\S)/g, "$1")
      .replace(/\s+/g, " ")
      .trim();
  }
  function detex(text) {
    return text
      .replace(/\\\(([\s\S]*?)\\\)/g, (_, tex) => plain(tex))
      .replace(/\\\[([\s\S]*?)\\\]/g, (_, tex) => plain(tex))
      .replace(/\$\$([\s\S]*?)\$\$/g, (_, tex) => plain(tex));
  }
  window.bookDetex = detex;  // for the site's tests
  function install() {
    if (typeof Search === "undefined" || Search.__detexed) return;
    const original = Search.htmlToText;
    Search.htmlToText = (html, anchor) => detex(original(html, anchor));
    Search.__detexed = true;
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
