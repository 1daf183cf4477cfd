"""The package's exception types.

Every problem with user input raises :class:`ObservationError` (a ``ValueError``) whose
message names the offending rows, pages and fields; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_LISTED = 10


def format_items(items: Sequence[object], limit: int = MAX_LISTED) -> str:
    """Render up to ``limit`` items and say how many more there are."""
    items = list(items)
    shown = ", ".join(repr(i) if isinstance(i, str) else str(i) for i in items[:limit])
    more = len(items) - limit
    return f"{shown} (+{more} more)" if more > 0 else shown


class ObservationError(ValueError):
    """Input that cannot be turned into valid observations.

    Parameters
    ----------
    message
        What is wrong, in words.
    field
        The column or field at fault, if there is one.
    rows
        Positions (0-based, in the input as given) of the offending rows.
    pages
        Labels of the offending pages.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        rows: Sequence[int] = (),
        pages: Sequence[object] = (),
    ) -> None:
        self.field = field
        self.rows = [int(r) for r in rows]
        self.pages = list(pages)
        parts = [message]
        if field is not None:
            parts.append(f"field: {field!r}")
        if self.rows:
            parts.append(f"rows: {format_items(self.rows)}")
        if self.pages:
            parts.append(f"pages: {format_items(self.pages)}")
        super().__init__("; ".join(parts))


class ArtifactError(RuntimeError):
    """A saved model or prior artifact does not match what it is being loaded into."""
