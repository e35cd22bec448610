"""Local Sphinx extension of the course website (enabled in book/_config.yml): every figure opens full size.

A figure a code cell outputs is shown scaled down to the text column (to about a third of its size in a
390 px phone window). Each such image is wrapped in a link to the image file itself, so that a tap or a
click opens it at full size, where the reader can zoom. Sphinx links only the images a page scales with
``:width:``/``:scale:`` (``html_scaled_image_link``); cell outputs have neither, so they get no link of
their own. An image already inside a link is left as it is.

The link is a node of its own, written when the page is: only then does the HTML builder know the name
under ``_images/`` that the image was copied to. Other builders write the image alone.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

#: The class of the link around each figure (book/_static/course.css may style it).
LINK_CLASS = "figure-full-size"


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


def depart_figure_link_html(self, node: figure_link) -> None:
    self.body.append("</a>")


def _pass(self, node: nodes.Node) -> None:
    pass


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_node(figure_link, html=(visit_figure_link_html, depart_figure_link_html),
                 latex=(_pass, _pass), text=(_pass, _pass), man=(_pass, _pass), texinfo=(_pass, _pass))
    # After course_site's describe_figures (priority 500) has given each image its alt text.
    app.connect("doctree-resolved", link_figures, priority=700)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
