"""The running mean the service keeps of how long things take on a worker (an admitted call's
stay, a batch item's time, a search's time per node): each new value moves it by a fixed
share of its distance, so it follows the worker's load and forgets old values."""

from __future__ import annotations


class RunningMean:
    """An exponentially weighted running mean. Not locked: its owner adds under its own lock."""

    __slots__ = ("value", "weight")

    def __init__(self, weight: float, first: float) -> None:
        self.weight = weight
        """The share of the distance to a new value that the mean moves by."""
        self.value = first

    def add(self, value: float) -> None:
        """Move the mean towards `value`."""
        self.value += self.weight * (value - self.value)
