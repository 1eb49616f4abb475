"""Render the report to one self-contained HTML string (inline SVG figures, inline CSS).

Every user-provided string (study descriptions, names) is escaped by Jinja's autoescaping; only
the SVG that matplotlib produced from our own data is inserted as markup.
"""

from __future__ import annotations

from collections.abc import Mapping

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from genlab.report.collect import Report
from genlab.report.tally import KIND_TITLE, LABEL, kind_of, number_text, tally


def _key_order(key: object) -> tuple:
    """Numeric keys in numeric order (250 before 1000), then the others as text."""
    try:
        return (0, float(str(key)), "")
    except ValueError:
        return (1, 0.0, str(key))


def _sorted(mapping: Mapping) -> dict:
    return {k: mapping[k] for k in sorted(mapping, key=_key_order)}


def _numbers_table(numbers: Mapping[str, object], depth: int = 0) -> Markup:
    """A claim's numbers as a small table (a mapping inside is a table inside, two levels deep;
    deeper ones are written inline), keys that are numbers sorted as numbers."""
    rows = []
    for key, value in (_sorted(numbers) if depth else numbers).items():
        if isinstance(value, Mapping) and value and depth < 2:
            cell = _numbers_table(value, depth + 1)
        else:  # number_text writes a deeper mapping inline
            cell = escape(number_text(_sorted(value) if isinstance(value, Mapping) else value))
        rows.append(Markup("<tr><th>{}</th><td>{}</td></tr>").format(key, cell))
    return Markup('<table class="numbers">{}</table>').format(Markup("").join(rows))


def render_html(report: Report) -> str:
    env = Environment(loader=PackageLoader("genlab.report", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["number"] = number_text
    env.filters["numbers_table"] = _numbers_table
    env.filters["status_label"] = LABEL.get
    sections = [
        {**section.__dict__, "figures": [(cap, Markup(svg)) for cap, svg in section.figures],
         "analyses": [{**a.__dict__, "figure": Markup(a.figure) if a.figure else None}
                      for a in section.analyses]}
        for section in report.sections
    ]
    claims = {kind: [c for c in report.claims if kind_of(c) == kind] for kind in KIND_TITLE}
    return env.get_template("index.html.j2").render(
        report=report, sections=sections, counts=tally(report.claims), claims=claims,
        kind_title=KIND_TITLE)
