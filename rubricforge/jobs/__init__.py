"""The application layer: each job runs its pipeline stages through one run directory
(:class:`~rubricforge.rundir.RunDir`), then exports, and returns one
:class:`~rubricforge.jobs.base.JobResult`: :mod:`~rubricforge.jobs.tree` (the evidence-tree dataset),
:mod:`~rubricforge.jobs.kg` (the knowledge-graph dataset), :mod:`~rubricforge.jobs.reward_score` (reward
scoring), :mod:`~rubricforge.jobs.dpo_pairs` (DPO preference pairs from scored rollouts), :mod:`~rubricforge.jobs.train`
(every training stage: its run directory, one resume rule, the budget stop). How a job
ends — complete, stopped by the budget, failed, interrupted — and whether a task is retried are decided
in :mod:`~rubricforge.jobs.base`; the flows only schedule. The jobs over independent items (reward score,
rubric generation and evaluation, report data, eval, the judge audit, rollouts) run on the resumable
item-job base, :class:`~rubricforge.jobs.items.ItemJob`, which also keeps their manifest when given a run
directory."""
