// Loaded before RequireJS and the ipywidgets HTML manager on pages with saved widget state
// (nb_ipywidgets_js in _config.yml), so that widgets render offline and beside MathJax 3.
(function () {
  "use strict";

  // 1. The manager loads its fonts relative to the URL RequireJS gives its modules, by default
  //    the page's folder + "@jupyter-widgets/html-manager/dist/". Map those module names to
  //    _static/vendor/html-manager/ (a `require` object defined before RequireJS loads is its
  //    configuration), and set the asset path the manager reads later.
  var here = document.currentScript && document.currentScript.src;
  if (here) {
    var manager = new URL("html-manager/", here).href;
    window.__jupyter_widgets_assets_path__ = manager;
    if (typeof window.require === "undefined") {
      window.require = {
        paths: {
          "@jupyter-widgets/html-manager/dist": manager.replace(/\/$/, ""),
          "@jupyter-widgets/html-manager": manager + "html-manager",
        },
      };
    }
  }

  // 2. ipywidgets typesets widget labels with MathJax 2's MathJax.Hub.Queue(["Typeset",
  //    MathJax.Hub, element]); the book loads MathJax 3, which has no Hub. Forward those calls
  //    to MathJax 3's typesetPromise, queueing them until MathJax has started. Labels are
  //    written with Jupyter's $...$ delimiters, which the site's MathJax does not scan for
  //    (a page's own math arrives as \(...\)): rewrite them in the label's plain text first.
  var pending = [];

  function toMathJaxDelimiters(element) {
    if (element.children.length || element.textContent.indexOf("$") < 0) {
      return;
    }
    element.textContent = element.textContent
      .replace(/\$\$([^$]+)\$\$/g, "\\[$1\\]")
      .replace(/\$([^$]+)\$/g, "\\($1\\)");
  }

  function typeset(elements) {
    var mj = window.MathJax;
    if (!elements.length || !mj || !mj.startup || !mj.typesetPromise) {
      return;
    }
    elements.forEach(toMathJaxDelimiters);
    mj.startup.promise = mj.startup.promise
      .then(function () { return mj.typesetPromise(elements); })
      .catch(function (err) { console.warn("MathJax could not typeset a widget label:", err); });
  }

  function queue() {
    var elements = [];
    Array.prototype.forEach.call(arguments, function (job) {
      if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
        elements.push(job[2]);
      }
    });
    var mj = window.MathJax;
    if (mj && mj.version && mj.typesetPromise) {
      typeset(elements);
    } else {
      pending.push.apply(pending, elements);
    }
  }

  function install() {
    if (!window.MathJax.Hub) {
      window.MathJax.Hub = { Queue: queue };
    }
    typeset(pending.splice(0));
  }

  var mj = window.MathJax;
  if (mj && mj.version) {
    install(); // MathJax 3 already running
    return;
  }
  // MathJax 3 is not loaded yet (or not on this page): answer calls made before it starts, and
  // install the bridge on the real MathJax object once it is ready.
  mj = window.MathJax = mj || {};
  mj.Hub = { Queue: queue };
  mj.startup = mj.startup || {};
  var ready = mj.startup.ready;
  mj.startup.ready = function () {
    if (ready) {
      ready();
    } else {
      window.MathJax.startup.defaultReady();
    }
    install();
  };
})();
