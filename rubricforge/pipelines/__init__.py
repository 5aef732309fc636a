"""The main job's stages: seeds, evidence trees, bottom-up synthesis, rule checks, verification, and
the orchestration that runs them resumably (:func:`rubricforge.pipelines.build.run_build`). The export
follows in :mod:`rubricforge.jobs`."""
