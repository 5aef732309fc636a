"""Prefect flows and tasks that schedule the jobs (no logic of their own: how a run ends and what is retried is
decided in :mod:`rubricforge.jobs`; the tree build's admission loop and finish are the job's,
:func:`rubricforge.jobs.tree.run_stages`, with one Prefect task per tree). Of the package they import
:mod:`rubricforge.jobs` (the index flow's stages too: :mod:`rubricforge.jobs.corpus`) and what sits below every
layer (config, errors, extras); the one exception is :mod:`.limits`, the Prefect implementation of the LLM
client's limit registry (:mod:`rubricforge.llm.limits`).

* :func:`rubricforge.flows.corpus.index_corpus` — load -> chunk -> embed -> index.
* :func:`rubricforge.flows.tree.build_dataset` — seed topics -> evidence trees -> synthesis -> rule
  checks -> verification -> export; ``build_trees``, ``synthesize``, ``verify`` and
  ``export_dataset`` run one stage alone.
* :func:`rubricforge.flows.kg.build_kg_dataset` — the knowledge-graph multi-hop dataset.
* :mod:`rubricforge.flows.runners` — threads, processes, Dask or Ray, from ``runner.*``.
* :mod:`rubricforge.flows.limits` — LLM limits shared by every worker (Prefect global concurrency limits).
* :mod:`rubricforge.flows.local` — how the CLI runs them: Prefect's logs in the run directory, Prefect's
  temporary server when no ``PREFECT_API_URL`` is set (:mod:`rubricforge.flows.session`), the progress bar.

Importing this package does not import Prefect; its modules do.
"""
