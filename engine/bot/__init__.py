"""The bot: suggests a move for the seat to move from that seat's information set alone."""

from engine.bot.levels import (
    DEFAULT_BUDGET,
    Budget,
    Candidate,
    Level,
    Suggestion,
    Why,
    default_seed,
    search_hands,
    suggest,
)

__all__ = [
    "DEFAULT_BUDGET",
    "Budget",
    "Candidate",
    "Level",
    "Suggestion",
    "Why",
    "default_seed",
    "search_hands",
    "suggest",
]
