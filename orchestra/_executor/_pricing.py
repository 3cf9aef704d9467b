"""Cost estimated from tokens, for agent CLIs that report none.

An executor definition may carry a price table (``[prices."<model>"]``, US
dollars per million tokens); the iteration's tokens per model, as the output
reports them, are priced with it. An estimate is marked as such wherever a cost
is shown, since the table is the user's, not the provider's bill.
"""

from __future__ import annotations

from ._definition import ExecutorSpec, ModelPrice
from ._observation import Observation

_PER = 1_000_000


def estimate_cost(spec: ExecutorSpec, observation: Observation) -> float | None:
    """The iteration's cost from ``spec.prices``; None when no price applies.

    Tokens the output gives no model name are priced as ``price_model``. A
    named model the table does not price is never priced as another: its
    tokens make the whole estimate unknown rather than wrong (see
    :func:`unpriced_models`).
    """
    if not spec.prices or not observation.models:
        return None
    total = 0.0
    for usage in observation.models:
        price = _price_for(spec, usage.model)
        if price is None:
            return None
        cached_price = price.cached_input if price.cached_input is not None else price.input
        total += (
            usage.input * price.input + usage.cached * cached_price + usage.output * price.output
        ) / _PER
    return round(total, 6)


def unpriced_models(spec: ExecutorSpec, observation: Observation) -> tuple[str, ...]:
    """The models whose tokens the definition's price table cannot price (their cost unknown).

    Tokens the output gives no model name belong to ``price_model``; with none
    set (or none priced), to "the executor's default model". A CLI that
    reports its own cost has nothing to price.
    """
    if spec.reports_cost or observation.cost_reported:
        return ()
    names = [
        usage.model or spec.price_model or "the executor's default model"
        for usage in observation.models
        if (usage.input or usage.cached or usage.output) and _price_for(spec, usage.model) is None
    ]
    return tuple(dict.fromkeys(names))


def default_price(spec: ExecutorSpec) -> ModelPrice | None:
    """The price of the model the executor runs when its output names none."""
    return _price_for(spec, "")


def _price_for(spec: ExecutorSpec, model: str) -> ModelPrice | None:
    if not model:
        # The output names no model: the one the definition runs.
        return spec.prices.get(spec.price_model) if spec.price_model else None
    if model in spec.prices:
        return spec.prices[model]
    # "claude-opus-4-5-20251101" and "claude-opus-4-5[1m]" are priced as "claude-opus-4-5":
    # the longest name the model's starts with.
    for name in sorted(spec.prices, key=len, reverse=True):
        if model.startswith(name):
            return spec.prices[name]
    return None
