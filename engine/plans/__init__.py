"""Capture plans (docs/rules.md section 3): what a played card may take from the floor.

Four modules, from the caller down; each lower one exists to make the one above cheap:

- `rule`: the rule itself. `plans_for(card, floor)` gives a card's plans (a J or the 7D
  sweeps, a Q or K takes its rank, a numeric card its rank and sum groups), keyed on the
  floor cards that can change them (`RELEVANT`), and refuses past the work bound.
- `memo`: the rule's memos, two levels keyed by packed integers: the plans of a card kind
  on its relevant floor, and the search on the shape of the smaller cards (memo.py says why
  these two).
- `search`: the search for the maximal collections of sum groups. It runs on a shape (how
  many cards of each smaller value lie there), so one result serves every floor with those
  counts, and it counts its steps for the work bound (docs/rules.md, [plans.work-bound]).
- `table`: the format of the plan table, the search's result for every shape a reachable
  floor can show, built ahead of time and installed by every worker at start (table.py says
  why; service/plan_table.py ships the file).
"""

from engine.plans.memo import clear_caches, install_plan_table
from engine.plans.rule import RELEVANT, Plan, plan_work, plans_for, plans_unmemoised

__all__ = [
    "RELEVANT",
    "Plan",
    "clear_caches",
    "install_plan_table",
    "plan_work",
    "plans_for",
    "plans_unmemoised",
]
