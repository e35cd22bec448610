/* Search snippets without repeated math (added by book/_ext/course_site.py).
   Sphinx's search shows a snippet of each result's page text; KaTeX writes every formula
   twice, once for the eye and once as MathML for screen readers, so "k experts" read
   "kkk experts". The MathML copy is dropped from the text the snippet is taken from. */
(function () {
  if (typeof Search === "undefined" || typeof Search.htmlToText !== "function") {
    return;
  }
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".katex-mathml").forEach((el) => el.remove());
    return htmlToText(page.documentElement.outerHTML, anchor);
  };
})();
