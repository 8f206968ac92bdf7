"""Cost from the four usage numbers and the run's own prices (modelrecord.md D.2).

A model without a price has *unknown* cost, never zero. Every try is charged, so the inputs here
are sums over every turn line.
"""

from __future__ import annotations

from dataclasses import dataclass

Price = tuple[float, float, float, float]  # input, output, cache write, cache read; per million


@dataclass(frozen=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_created: int = 0
    cache_read: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cache_created + other.cache_created,
            self.cache_read + other.cache_read,
        )

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_created + self.cache_read

    @property
    def all_input(self) -> int:
        """Every token the model read: plain input, cache writes and cache reads."""
        return self.input + self.cache_created + self.cache_read

    @property
    def cache_read_share(self) -> float | None:
        return self.cache_read / self.all_input if self.all_input else None

    @classmethod
    def of(cls, obj: object) -> Tokens:
        return cls(
            obj.input_tokens,
            obj.output_tokens,
            obj.cache_created_tokens,  # type: ignore[attr-defined]
            obj.cache_read_tokens,
        )  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Cost:
    input: float
    output: float
    cache_write: float
    cache_read: float

    @property
    def total(self) -> float:
        return self.input + self.output + self.cache_write + self.cache_read

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.input + other.input,
            self.output + other.output,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
        )


def cost_of(tokens: Tokens, price: Price | None) -> Cost | None:
    """The four dollar components, or None when the model is unpriced."""
    if price is None:
        return None
    return Cost(
        tokens.input * price[0] / 1_000_000,
        tokens.output * price[1] / 1_000_000,
        tokens.cache_created * price[2] / 1_000_000,
        tokens.cache_read * price[3] / 1_000_000,
    )


def cost_without_cache(tokens: Tokens, price: Price | None) -> float | None:
    """What the same tokens would cost if cache reads and writes were priced as plain input."""
    if price is None:
        return None
    return (tokens.all_input * price[0] + tokens.output * price[1]) / 1_000_000


def usd(value: float | None, *, digits: int = 4) -> str:
    if value is None:
        return "unknown"
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.{digits}f}"
