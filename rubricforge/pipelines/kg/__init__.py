"""Knowledge-graph multi-hop tasks (MindDR §4.1, §4.5, §4.6; query-specific rubrics §3.2).

graph (corpus links + LLM relations, canonicalised) → subgraph sampling under the three constraints
→ question generation, obfuscation, rewriting → filters → examples with answer, key entity set, hops,
difficulty and subgraph, plus long-form research queries with RACE rubrics. Entry point:
:func:`rubricforge.pipelines.kg.run.run_kg`.
"""
