/* The site search's scorer (Sphinx's html_search_scorer, set by book/_ext/course_site.py; Sphinx
   writes this file into _static/language_data.js, which the search page loads with searchtools.js).

   Sphinx's index knows, for each word, the pages that hold it in their text and the pages that hold
   it in a title or heading; not how often. Its scores: 15 for a word in a title or heading, 5 in the
   text (less for a part of a word), a section whose title contains the query at most 15, an API
   object up to 26. Ties are broken alphabetically, so the exercises of chapter 10 came before
   chapter 3, which teaches the term. Here a result gains by what its page is for:

   - a chapter's page (book/chNN_...) teaches: +12, so that a chapter that uses a word in its text
     (5 + 12) ranks above exercises that have it in a heading (15), and a chapter with the word in a
     heading (15 + 12) above every other chapter;
   - the reference pages (API, formula index, book map) come next: +4;
   - an exercise page keeps its score; a solution page, which repeats its exercise, -2;
   - on those pages, each heading that holds the whole query (spaces and hyphens aside), +2, up to +6:
     of two chapters with the word in a heading, the one with several sections about it comes first
     (not on exercise pages, whose headings name what an exercise uses, not what it teaches).

   The scores stay ordered within each kind of page, so titles and headings still weigh most. */
var courseHeadingCounts = {};

function courseHeadingsWith(docname) {
  const squash = (text) => text.toLowerCase().replace(/[\s\-_]+/g, "");
  const query = squash(new URLSearchParams(window.location.search).get("q") || "");
  if (!query || typeof Search === "undefined" || !Search._index) return 0;
  if (!(query in courseHeadingCounts)) {
    const counts = {};
    const index = Search._index;
    for (const [title, found] of Object.entries(index.alltitles || {})) {
      if (!squash(title).includes(query)) continue;
      for (const [file] of found) counts[index.docnames[file]] = (counts[index.docnames[file]] || 0) + 1;
    }
    courseHeadingCounts[query] = counts;
  }
  return courseHeadingCounts[query][docname] || 0;
}

var Scorer = {
  score: (result) => {
    const [docname, title, anchor, descr, score, filename] = result;
    const headings = 2 * Math.min(courseHeadingsWith(docname), 3);
    if (/^book\/(ru\/)?ch\d+_/.test(docname)) return score + 12 + headings;
    if (/^book\//.test(docname)) return score + 4 + headings;
    if (/^solutions\//.test(docname)) return score - 2;
    return score;
  },

  // Sphinx's defaults (searchtools.js), kept: this object replaces its Scorer whole.
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {
    0: 15,
    1: 5,
    2: -5,
  },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
