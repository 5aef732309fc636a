"""Shared file services, below every domain package: atomic writes and the JSON reader (:mod:`.files`), keyed stage
logs (:mod:`.stagelog`), the progress bar (:mod:`.progress`), rejected input records (:mod:`.rejects`) and the
dataset readers (:mod:`.datasets`). They know no job, pipeline or config; the run directory that uses them is
:mod:`rubricforge.rundir`."""
