"""Evaluation: task sets and reports (:mod:`.tasks`), scorers with the papers' definitions (:mod:`.scorers`,
:mod:`.exact`), statistics (:mod:`.stats`: bootstrap CIs, paired comparisons, sign test) and the HTML reports
(:mod:`.report`), the gold judge during training (:mod:`.gold`) and human-labelled rubric verification
(:mod:`.labels`). The resumable job over a run directory and the comparison of two runs are
:mod:`rubricforge.jobs.evaluate` (``rubricforge eval``); the judge audit is :mod:`rubricforge.jobs.judge_audit`
(``rubricforge judge audit``).
"""
