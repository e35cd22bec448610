"""Local Sphinx extension of the course website (enabled in book/_config.yml): every figure opens full size.

A figure a code cell outputs is shown scaled down to the text column (to about a third of its size in a
390 px phone window). Each such image is wrapped in a link to the image file itself, so that a tap or a
click opens it at full size, where the reader can zoom. Sphinx links only the images a page scales with
``:width:``/``:scale:`` (``html_scaled_image_link``); cell outputs have neither, so they get no link of
their own. An image already inside a link is left as it is.

The link is a node of its own, written when the page is: only then does the HTML builder know the name
under ``_images/`` that the image was copied to. Other builders write the image alone.

Each such image also says how small its text is: scalelib, imported by every chapter, records in a figure's
output metadata the font size of its smallest text in pixels of the PNG (``{"scalelib": {"min_text_px": ..}}``,
scalelib/_plot.py). MyST-NB keeps no output metadata on the image but its width and height, so its image
renderer is wrapped to keep this one too, and the page's <img> gets it as ``data-min-text-px``. The browser
test (tests/test_site.py) multiplies it by the image's shown width over its natural width: the text's size as
a reader's screen shows it.
"""

from __future__ import annotations

import functools
import posixpath
import urllib.parse
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

#: The class of the link around each figure (book/_static/course.css may style it).
LINK_CLASS = "figure-full-size"
#: Where a figure's output metadata keeps the size of its smallest text (scalelib._plot.FIGURE_METADATA_KEY).
METADATA_KEY = "scalelib"
#: The <img> attribute that carries it: the smallest text's font size in pixels of the image file.
TEXT_SIZE_ATTRIBUTE = "data-min-text-px"


class figure_link(nodes.General, nodes.Element):
    """A link to the full-size file of the one image it holds."""


def _in_cell_output(node: nodes.Node) -> bool:
    while node is not None:
        if "cell_output" in getattr(node, "get", lambda *_: [])("classes", []):
            return True
        node = node.parent
    return False


def link_figures(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Wrap each image a cell outputs in a figure_link, unless it is already linked."""
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, (nodes.reference, figure_link)) or not _in_cell_output(image):
            continue
        link = figure_link()
        image.replace_self(link)
        link.append(image)


def text_size_of(output_metadata: dict) -> float | None:
    """The smallest text's size (pixels of the image) a figure's output metadata records, or None."""
    recorded = (output_metadata or {}).get(METADATA_KEY)
    size = recorded.get("min_text_px") if isinstance(recorded, dict) else None
    return float(size) if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0 else None


def _keep_text_size(render_image):
    """MyST-NB's image renderer, which also keeps the output's recorded text size on the image node."""
    @functools.wraps(render_image)
    def render(self, data):
        rendered = render_image(self, data)
        size = text_size_of(data.output_metadata)
        if size is not None:
            for node in rendered:
                if isinstance(node, nodes.image):
                    node["min_text_px"] = size
        return rendered

    render.keeps_text_size = True
    return render


def full_size_href(builder: Any, uri: str) -> str:
    """The address the page's <img> will load `uri` from: the copy under _images/ when the builder made one."""
    images = getattr(builder, "images", {})
    if uri in images:
        return posixpath.join(builder.imgpath, urllib.parse.quote(images[uri]))
    return uri


def visit_figure_link_html(self, node: figure_link) -> None:
    image = node[0]
    alt = image.get("alt", "")
    label = f"Open the figure full size: {alt}" if alt else "Open the figure full size"
    self.body.append(self.starttag(node, "a", "", CLASS=LINK_CLASS, href=full_size_href(self.builder, image["uri"]),
                                   title="Open full size", **{"aria-label": label}))


    node["body_start"] = len(self.body)


def depart_figure_link_html(self, node: figure_link) -> None:
    size = node[0].get("min_text_px")
    if size is not None:  # on the <img> the image node wrote, the first tag after the link's own
        for index in range(node.get("body_start", len(self.body)), len(self.body)):
            if self.body[index].startswith("<img "):
                self.body[index] = f'<img {TEXT_SIZE_ATTRIBUTE}="{size:g}" ' + self.body[index][len("<img "):]
                break
    self.body.append("</a>")


def _pass(self, node: nodes.Node) -> None:
    pass


def setup(app: Sphinx) -> dict[str, Any]:
    from myst_nb.core.render import NbElementRenderer

    if not getattr(NbElementRenderer.render_image, "keeps_text_size", False):
        NbElementRenderer.render_image = _keep_text_size(NbElementRenderer.render_image)
    app.add_node(figure_link, html=(visit_figure_link_html, depart_figure_link_html),
                 latex=(_pass, _pass), text=(_pass, _pass), man=(_pass, _pass), texinfo=(_pass, _pass))
    # After course_site's describe_figures (priority 500) has given each image its alt text.
    app.connect("doctree-resolved", link_figures, priority=700)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
