"""The two-stage cascade ``l2d-staged``, in one home: the main agent answers; where the router
doubts that answer it asks the pool's cheapest expert too, compares the two answers, and only then
decides whether a dearer expert is worth its cost.

- :mod:`.rule`: the rule itself on arrays (SPEC §5's plug-in rule applied twice: the doubt, the
  threshold for asking, the second stage's choice, what each question costs and pays);
- :mod:`.router`: the router on a benchmark (:class:`~.router.StagedRouter`: its two post-hoc
  heads, the threshold at a cost setting, budgets);
- :mod:`.frozen`: what it saves (:class:`~.frozen.StagedConfig`) and how, frozen, it routes new
  queries, asking the expert only where it doubts (:func:`~.frozen.staged_route`).

Both stages are post-hoc heads (:class:`~l2d_core.routers.posthoc.PosthocRouter`): the first reads
the main agent's answer and its confidence (and optional helpers), the second also reads the asked
expert's answer, described as the main agent's is (its agreement with the main answer, length,
where it occurs in the context, whether the question's words surround it: chosen on validation
articles). At a cost setting the one thing fitted is the doubt threshold, chosen for the least
TDL on the training articles' out-of-fold estimates — milliseconds, so any α/β applies instantly.
An asked expert that cannot answer new text is named ("would ask …") and the decision stops there:
its answer is never made up.
"""

from .frozen import StagedConfig, staged_route, staged_stages
from .router import StagedRouter
from .rule import (
    ask_threshold,
    main_doubt,
    second_stage_choice,
    staged_choice,
    staged_paid,
    staged_query_costs,
    staged_values,
)

__all__ = [
    "StagedRouter",
    "StagedConfig",
    "staged_route",
    "staged_stages",
    "ask_threshold",
    "main_doubt",
    "second_stage_choice",
    "staged_choice",
    "staged_paid",
    "staged_query_costs",
    "staged_values",
]
