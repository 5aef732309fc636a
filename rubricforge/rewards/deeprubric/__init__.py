"""DeepRubric's rewards (evidence-tree paper): rubric judge (Eq. 4), format (Eq. 7), search (Eq. 8), citation
(App. A.4, Eqs. 9–14; claims come from :mod:`rubricforge.rewards.claims`), and their composite (Eq. 5)."""
