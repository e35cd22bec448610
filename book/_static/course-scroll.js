/* A box that scrolls sideways says so (added to every page by book/_ext/course_site.py).
   A wide table, equation or code block scrolls inside its own box. The element that really scrolls
   is found here (a table, the theme's table container, KaTeX's inner .katex-html, a code block's
   <pre>: whichever has overflow-x auto or scroll), and a box that does not scroll, around it (its
   "host": KaTeX's .katex, a code block's div.highlight, or a wrapper added here), gets the classes
   course-more-left / course-more-right while content is hidden on that side. course.css draws the
   cue as a shade over the host's edge, above the table's striped rows and the code's background,
   so it is seen whatever the box holds; scrolling and resizing update it. */
(function () {
  const SCROLLERS = [
    "article table",
    "article .pst-scrollable-table-container",
    "article .table-wrapper",
    "article .katex-display",
    "article .katex-html",
    "article pre",
  ].join(", ");
  const tracked = [];

  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);

  function hostOf(el) {
    const parent = el.parentElement;
    if (parent.classList.contains("course-scroll")) return parent;
    // KaTeX's CSS styles .katex-display > .katex > .katex-html: no wrapper between them.
    if (el.classList.contains("katex-html") || parent.matches("div.highlight")) {
      parent.classList.add("course-scroll");
      return parent;
    }
    const wrapper = document.createElement("div");
    wrapper.className = "course-scroll";
    parent.insertBefore(wrapper, el);
    wrapper.appendChild(el);
    return wrapper;
  }

  // Reads (the sizes) first, then writes (the classes): a page of hundreds of boxes is laid out once,
  // not once per box.
  function measure(el) {
    const hidden = el.scrollWidth - el.clientWidth;
    return [hidden > 1 && el.scrollLeft > 1, hidden > 1 && el.scrollLeft < hidden - 1];
  }

  function show(el, [left, right]) {
    el.courseScrollHost.classList.toggle("course-more-left", left);
    el.courseScrollHost.classList.toggle("course-more-right", right);
  }

  const update = (el) => show(el, measure(el));

  function updateEach(els) {
    const states = els.map(measure);
    els.forEach((el, i) => show(el, states[i]));
  }

  function init() {
    // Which boxes scroll is read for all of them before any wrapper is added (the wrappers change no
    // overflow), so the style is computed once.
    const found = [...document.querySelectorAll(SCROLLERS)].filter((el) => !el.courseScrollHost && scrolls(el));
    for (const el of found) {
      // A scroller inside another tracked one (a table in the theme's container) is its own box.
      el.courseScrollHost = hostOf(el);
      el.addEventListener("scroll", () => update(el), { passive: true });
      tracked.push(el);
    }
    updateEach(found);
  }

  const updateAll = () => updateEach(tracked);
  window.addEventListener("resize", updateAll);
  // A folded cell opened (<details>), or a toggled one shown: its boxes have their size only now.
  document.addEventListener("toggle", updateAll, true);
  document.addEventListener("click", () => requestAnimationFrame(updateAll));
  // Web fonts (KaTeX's) change widths once they load.
  window.addEventListener("load", updateAll);
  if (document.fonts) document.fonts.ready.then(updateAll);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
