"""The STRONG bot's evaluation weights, fitted on its own play (generated).

Written by `benchmarks/bot_fit.py --matches 400 --procs 2 --write`
(2026-12-02 02:00 UTC, commit 76bb43a): least squares of what the seat to move
went on to score in the hand, less the other seat, on the features of
engine.bot.evaluation; a weight is in thousandths (1000: a feature counts as it is)
(7340 round starts; docs/bot.md, "Evaluation").
"""

HORIZON: tuple[tuple[int, ...], ...] = (
    (0, 0, 0, 0, 0, 0, 0),  # 0 plays left
    (949, 16439, 593, 13558, 0, 10358, 0),  # 1 plays left
    (948, 22251, 837, 9695, -13570, 5308, -16808),  # 2 plays left
    (952, 11687, 411, 12536, -9749, 13987, -11390),  # 3 plays left
    (948, 15506, 941, 8822, -12542, 9582, -18632),  # 4 plays left
    (950, 12849, 543, 11561, -8764, 13842, -14351),  # 5 plays left
    (954, 13870, 728, 8845, -11567, 8414, -19173),  # 6 plays left
    (965, 12717, 567, 11172, -9036, 13900, -14255),  # 7 plays left
    (972, 13553, 1454, 9879, -11061, 10155, -18011),  # 8 plays left
)
"""Per plays left in the round, the weight of each of HORIZON_FEATURES."""

ROUND_END: tuple[int, ...] = (948, 1469, 1325, 305)
"""The weight of each of ROUND_END_FEATURES."""
