"""Exception groups from trio's nurseries, turned back into the error they carry."""

from __future__ import annotations

from collections.abc import Iterator

import trio


def leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    """Every exception in ``group``, nested groups flattened."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from leaves(exc)
        else:
            yield exc


def sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception other than a cancellation that ``group`` carries, else the group.

    A nursery wraps what its tasks raise; a caller that started a helper task
    beside its own work expects that work's plain error. The cancellations
    dropped with it are raised again at the next checkpoint of a cancelled scope.
    """
    errors = [leaf for leaf in leaves(group) if not isinstance(leaf, trio.Cancelled)]
    return errors[0] if len(errors) == 1 else group
