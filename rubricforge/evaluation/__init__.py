"""Evaluation: task sets and reports (:mod:`.tasks`), scorers with the papers' definitions (:mod:`.scorers`,
:mod:`.exact`), statistics (:mod:`.stats`: bootstrap CIs, paired comparisons, sign test) and the HTML reports
(:mod:`.report`). The resumable job over a run directory and the comparison of two runs are
:mod:`rubricforge.jobs.evaluate`; the command line is ``rubricforge eval``.
"""
