"""SCORE's rewards (self-evolving evaluator): search-assisted assessment, the report reward with its verifier,
consistency with an EMA baseline, and the citation check."""
