"""Tables that fit the terminal: the CLI's listings drop their least useful columns until the rest
fit, rather than cutting every cell to "sche…". What a row is about (an id, a status, a type)
is never cut: a long one wraps onto the next line of its cell.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table

# What a column costs besides its text: one space each side, one rule between columns.
_PER_COLUMN = 3
_WRAPPED = 20  # what a wrapping column is counted at when deciding what fits: it folds past it


@dataclass(frozen=True)
class FitColumn:
    name: str
    keep: int  # lower keeps longer: the column dropped first is the one with the highest
    wrap: bool = False  # a long value wraps (never cut); otherwise it is kept on one line whole


def fit_table(columns: Sequence[FitColumn], rows: Sequence[Sequence[str]], width: int | None = None) -> Table:
    """A table of `rows` with as many of `columns` as fit in `width` (the terminal's by default)."""
    width = width if width is not None else Console().width
    widths = [max([len(c.name), *(_widest_line(row[i]) for row in rows)]) for i, c in enumerate(columns)]
    needs = [
        min(w, max(_WRAPPED, len(c.name))) if c.wrap else w for w, c in zip(widths, columns, strict=True)
    ]
    kept = list(range(len(columns)))
    for index in sorted(kept, key=lambda i: -columns[i].keep):
        if sum(needs[i] + _PER_COLUMN for i in kept) <= width or len(kept) == 1:
            break
        if columns[index].keep > 0:  # keep 0: never dropped (it wraps instead)
            kept.remove(index)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i in kept:
        column = columns[i]
        if column.wrap:
            table.add_column(column.name, overflow="fold")
        else:
            table.add_column(column.name, no_wrap=True, min_width=widths[i])
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table


def _widest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)
