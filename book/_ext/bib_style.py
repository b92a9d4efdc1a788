"""An author-year bibliography to match the author-year citations.

The book cites as "(Bahdanau et al., 2014)" (``bibtex_reference_style: author_year``),
but pybtex's built-in styles label the bibliography "[BCB14]" (alpha) or "[1]" (plain),
so a reader cannot find the cited work by its name. This registers a pybtex style,
``authoryear`` (``bibtex_default_style`` in _config.yml): the entries of the plain
style, sorted by author, year and title, and labelled "Bahdanau et al., 2014", "Jain and
Wallace, 2019", "Nadaraya, 1964".
"""
from __future__ import annotations

from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx


def _surname(person) -> str:
    return " ".join(
        str(part) for part in person.rich_prelast_names + person.rich_last_names
    )


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        labels = [self.format_label(entry) for entry in sorted_entries]
        count, seen = Counter(labels), Counter()
        for label in labels:
            if count[label] == 1:
                yield label
            else:  # two works by the same authors in one year: 2014a, 2014b
                yield label + chr(ord("a") + seen[label])
                seen[label] += 1

    def format_label(self, entry) -> str:
        persons = entry.persons.get("author") or entry.persons.get("editor") or []
        if not persons:
            names = entry.fields.get("organization", entry.key)
        elif len(persons) == 1:
            names = _surname(persons[0])
        elif len(persons) == 2:
            names = f"{_surname(persons[0])} and {_surname(persons[1])}"
        else:
            names = f"{_surname(persons[0])} et al."
        year = entry.fields.get("year")
        return f"{names}, {year}" if year else names


class AuthorYearStyle(PlainStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"


def setup(app: Sphinx) -> dict:
    register_plugin(
        "pybtex.style.labels", "authoryear", AuthorYearLabelStyle, force=True
    )
    register_plugin(
        "pybtex.style.formatting", "authoryear", AuthorYearStyle, force=True
    )
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
