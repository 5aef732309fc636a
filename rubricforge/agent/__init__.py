"""The deep-research agent, shared by data building, training and evaluation (DeepRubric App. D; HOTE §2.1; seed
004's MaMs).

* :mod:`~rubricforge.agent.prompt` — the system prompts (tool and no-tool modes) and a question's prompt;
* :mod:`~rubricforge.agent.rows` — a dataset's rows as the agent's training rows (columns checked, prompt added);
* :mod:`~rubricforge.agent.environment` — the per-episode search / browse / scholar tools, and the no-tool mode;
* :mod:`~rubricforge.agent.react` — the ReAct-style episode (think, call tools, answer);
* :mod:`~rubricforge.agent.mams` — the MaMs workflow (search, state and report agents).

It sits below ``training/``, ``export/`` and ``jobs/`` and imports nothing from them; torch, transformers and
trl are not imported here.
"""
