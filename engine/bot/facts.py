"""Points of a hand, as the bot reads them (to be replaced by engine.facts)."""

MAJORITY_CARDS = 27
MAJORITY_POINTS = 30
JACK_POINTS = 1
ACE_POINTS = 1
TWO_OF_CLUBS_POINTS = 2
TEN_OF_DIAMONDS_POINTS = 3
BASRA_POINTS = 10
HAND_CARDS = 4
TARGET = 121
